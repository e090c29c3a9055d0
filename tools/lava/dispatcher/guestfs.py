# SPDX-License-Identifier: GPL-2.0
"""libguestfs's Python binding, for lava-dispatcher's import only.

lava_dispatcher.utils.filesystem imports guestfs at its top, and every
action module reaches it. Debian's python3-guestfs pulls libguestfs,
systemd-sysv and a hundred packages more onto the machine; nmiclock's
QEMU job (tools/lava/qemu-x86_64.yaml) takes no step that uses it: no
lava-test-shell overlay on a guest disk image. scripts/test-lava --run
puts this directory first on lava-run's path. A job that does need it
fails at once, saying so.
"""


class GuestFS:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("libguestfs is not installed: scripts/test-lava --run runs only "
                           "jobs without a lava-test-shell overlay (tools/lava/qemu-x86_64.yaml)")
