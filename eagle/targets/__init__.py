"""Targets: each turns lowered IR into a binary and launches it. Only the host (LLVM CPU) exists so far."""
