# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of nmiclock.ko.
#
#   make                          against the running kernel's build tree
#   make KDIR=/path/to/build LLVM=1
#                                 against your own Rust-enabled kernel build
#                                 (pass the same LLVM=/RUSTC= it was built with)
#   make PROVISIONED=1            against the kernel scripts/provision built
#                                 (FLAVOUR=default), with its toolchain
#   make PROVISIONED=1 ARCH=arm64 against the arm64 kernel scripts/provision
#                                 --arch arm64 built (cross-compiled)
#   make PROVISIONED=1 RELEASE=7.3
#                                 against the 7.3 kernel scripts/provision
#                                 --release 7.3 built (RELEASE=6.12, the
#                                 default, is the 6.12 one)
#   make clean | modules_install | help
#
# The project's two main commands are scripts/run-main and scripts/run-tests
# (see README.md); `make run` and `make check` call them, `make bench`
# calls scripts/run-bench (the benchmark table) and `make soak` calls
# scripts/soak (SOAK="--reads 100M" by default: a long stress run).

KDIR ?= /lib/modules/$(shell uname -r)/build
FLAVOUR ?= default

ifneq ($(PROVISIONED),)
PROVISION_ARCH := --arch $(or $(ARCH),x86_64) $(if $(RELEASE),--release $(RELEASE))
KDIR := $(shell $(CURDIR)/scripts/provision $(PROVISION_ARCH) --flavour $(FLAVOUR) --print-kdir)
ifeq ($(KDIR),)
$(error no provisioned '$(FLAVOUR)' kernel for $(or $(ARCH),x86_64): run scripts/provision $(PROVISION_ARCH) first)
endif
TOOLCHAIN := $(shell $(CURDIR)/scripts/provision $(PROVISION_ARCH) --print-make-vars)
endif

# bindgen loads libclang at run time, the first it finds unless
# LIBCLANG_PATH says where: with LLVM=-N (given, or from the provisioned
# toolchain) that of LLVM N where it is installed, as scripts/provision
# builds the kernel; a libclang of another version rejects flags of the
# kernel's. An LIBCLANG_PATH already set is kept.
NMICLOCK_LLVM := $(or $(LLVM),$(patsubst LLVM=%,%,$(filter LLVM=%,$(TOOLCHAIN))))
ifneq ($(filter -%,$(NMICLOCK_LLVM)),)
ifeq ($(origin LIBCLANG_PATH),undefined)
NMICLOCK_LIBCLANG := $(wildcard /usr/lib/llvm$(NMICLOCK_LLVM)/lib)
ifneq ($(NMICLOCK_LIBCLANG),)
export LIBCLANG_PATH := $(NMICLOCK_LIBCLANG)
endif
endif
endif

KMAKE = $(MAKE) -C $(KDIR) M=$(CURDIR) $(TOOLCHAIN)

all: modules

# The kernel the objects here were last built against (its tree and its
# .config): Kbuild's dependencies name that tree's headers, so against
# another tree of the same architecture stale objects would be reused and
# fail to link (or worse, link); a build against another kernel cleans
# first.
BUILT_FOR := $(CURDIR)/.nmiclock-built-for

modules modules_install:
	@test -e $(KDIR)/Makefile || { \
		echo "nmiclock: no kernel build tree at KDIR=$(KDIR)" >&2; \
		echo "nmiclock: pass KDIR=/path/to/build or use PROVISIONED=1" >&2; \
		exit 2; }
	@want="$(abspath $(KDIR)) $$(cksum <$(KDIR)/.config 2>/dev/null)"; \
	if [ -e $(BUILT_FOR) ] && [ "$$(cat $(BUILT_FOR))" != "$$want" ]; then \
		echo "nmiclock: last built against another kernel ($$(cut -d' ' -f1 $(BUILT_FOR))): cleaning first"; \
		$(MAKE) --no-print-directory clean >/dev/null; \
	fi; \
	echo "$$want" >$(BUILT_FOR)
	$(KMAKE) $@

clean:
	@if [ -e $(KDIR)/Makefile ]; then $(KMAKE) clean; fi
	rm -f rust/*.o rust/.*.cmd rust/*.d rust/.*.d samples/*.o samples/*.ko \
		samples/*.mod samples/*.mod.c samples/.*.cmd *.o *.ko *.mod *.mod.c \
		samples/zoo/*.o samples/zoo/*.ko samples/zoo/*.mod samples/zoo/*.mod.c \
		samples/zoo/.*.cmd \
		.*.cmd modules.order Module.symvers .nmiclock-built-for

run:
	scripts/run-main

check:
	scripts/run-tests

bench:
	scripts/run-bench

SOAK ?= --reads 100M
soak:
	scripts/soak $(SOAK)

help:
	@sed -n '3,23p' Makefile | sed 's/^# \{0,1\}//'

.PHONY: all modules modules_install clean run check bench soak help
