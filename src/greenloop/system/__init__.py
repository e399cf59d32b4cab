"""The operating-system layer: subprocesses, /proc, the child environment, sandboxes, the
working-tree fingerprint. The only package that talks to the kernel directly."""
