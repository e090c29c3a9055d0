# SPDX-License-Identifier: GPL-2.0
#
# include/nmiclock.mk: the bindgen rule for a Rust module that uses
# include/nmiclock.h, for its Kbuild (nmiclock's own Kbuild uses it too).
#
#   include $(NMICLOCK)/include/nmiclock.mk
#   $(obj)/nmiclock_h_generated.rs: $(NMICLOCK)/include/nmiclock.h FORCE
#   	$(call if_changed_dep,nmiclock_h_bindgen)
#   targets += nmiclock_h_generated.rs
#   $(obj)/my_clock.o: $(obj)/nmiclock_h_generated.rs
#
# and in the Rust source, inside a module: use kernel::ffi;
# include!("nmiclock_h_generated.rs"). NMICLOCK is the nmiclock tree:
# scripts/run-main --with DIR passes it, by hand pass NMICLOCK=PATH to make.
# The declarations are generated with the kernel's bindgen and C flags, as
# the kernel's rust/Makefile generates its own bindings, so a header and a
# module out of step fail the build, not the run.

nmiclock_bindgen_target_x86 := x86_64-linux-gnu
nmiclock_bindgen_target_arm64 := aarch64-linux-gnu

# A GCC-built kernel's C flags include GCC's own, which libclang rejects:
# rust/Makefile leaves out those it lists in bindgen_skip_c_flags, and so do
# we, with the list read from the tree's own rust/Makefile (it grows from
# release to release).
ifdef CONFIG_CC_IS_GCC
nmiclock_bindgen_skip := $(shell sed -n '/^bindgen_skip_c_flags :=/,/[^\\]$$/p' \
	$(srctree)/rust/Makefile | sed 's/^bindgen_skip_c_flags :=//; s/\\$$//')
ifeq ($(nmiclock_bindgen_skip),)
$(error nmiclock: no bindgen_skip_c_flags in $(srctree)/rust/Makefile: a GCC-built tree's C flags cannot be given to bindgen)
endif
nmiclock_bindgen_c_flags = $(filter-out $(nmiclock_bindgen_skip),$(c_flags))
else
nmiclock_bindgen_c_flags = $(c_flags)
endif

# What both of nmiclock's bindgen rules pass: the options, then the header's
# allowlist and any more (nmiclock_bindgen_args ALLOWLIST-OPTIONS).
nmiclock_bindgen_args = $(BINDGEN) $< --rust-target 1.68 --use-core --ctypes-prefix ffi \
	--no-layout-tests --no-debug '.*' --no-doc-comments \
	--allowlist-file '(.*/)?include/nmiclock\.h' $(1) \
	-o $@ -- $(nmiclock_bindgen_c_flags) -w --target=$(nmiclock_bindgen_target_$(SRCARCH)) \
	-fno-builtin -D__BINDGEN__ -DMODULE

# include/nmiclock.h's declarations, and nothing else.
quiet_cmd_nmiclock_h_bindgen = BINDGEN $@
      cmd_nmiclock_h_bindgen = $(call nmiclock_bindgen_args,)
