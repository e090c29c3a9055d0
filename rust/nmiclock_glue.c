// SPDX-License-Identifier: GPL-2.0
/*
 * nmiclock_glue.c: thin, typed wrappers over kernel APIs that the 6.12 Rust
 * `kernel` crate does not wrap.  No logic lives here; see nmiclock_glue.h
 * for why each function exists and rust/ffi.rs for its Rust side.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <asm/tsc.h>

#include "nmiclock_glue.h"

static int nmiclock_seq_show(struct seq_file *m, void *v)
{
	return nmiclock_rs_show(m, m->private);
}

static int nmiclock_debugfs_open(struct inode *inode, struct file *file)
{
	return single_open(file, nmiclock_seq_show, inode->i_private);
}

/*
 * debugfs_create_file() gives these a full proxy: debugfs_remove() waits for
 * every ->show() in flight, so Rust data behind @priv may go once it returns.
 */
static const struct file_operations nmiclock_debugfs_fops = {
	.owner = THIS_MODULE,
	.open = nmiclock_debugfs_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

struct dentry *nmiclock_debugfs_create_dir(const char *name)
{
	return debugfs_create_dir(name, NULL);
}

struct dentry *nmiclock_debugfs_create_file(const char *name, umode_t mode,
					    struct dentry *parent,
					    const void *priv)
{
	return debugfs_create_file(name, mode, parent, (void *)priv,
				   &nmiclock_debugfs_fops);
}

void nmiclock_debugfs_remove(struct dentry *dentry)
{
	debugfs_remove(dentry);
}

int nmiclock_seq_write(struct seq_file *m, const char *buf, size_t len)
{
	return seq_write(m, buf, len);
}

unsigned int nmiclock_num_online_cpus(void)
{
	return num_online_cpus();
}

unsigned int nmiclock_tsc_khz(void)
{
	return tsc_khz;
}
