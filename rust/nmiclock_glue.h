/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nmiclock_glue.h: the C side of nmiclock, for what the 6.12 Rust `kernel`
 * crate does not wrap.  rust/ffi.rs declares the same functions for Rust and
 * wraps them in safe types; nothing else in Rust calls them.
 *
 * Why each one exists:
 *  - debugfs and seq_file: no Rust abstraction in 6.12.
 *  - cpumask and tsc_khz: macros and arch data bindgen does not see.
 *
 * The Rust side implements nmiclock_rs_show(), the seq_file ->show() of
 * every debugfs file the glue creates.
 */
#ifndef NMICLOCK_GLUE_H
#define NMICLOCK_GLUE_H

#include <linux/types.h>

struct dentry;
struct seq_file;

/* Implemented in Rust (rust/ffi.rs): render the file whose private data is @priv. */
int nmiclock_rs_show(struct seq_file *m, const void *priv);

struct dentry *nmiclock_debugfs_create_dir(const char *name);
struct dentry *nmiclock_debugfs_create_file(const char *name, umode_t mode,
					    struct dentry *parent,
					    const void *priv);
void nmiclock_debugfs_remove(struct dentry *dentry);
int nmiclock_seq_write(struct seq_file *m, const char *buf, size_t len);

unsigned int nmiclock_num_online_cpus(void);
unsigned int nmiclock_tsc_khz(void);

#endif /* NMICLOCK_GLUE_H */
