"""What a CI machine must have: the tools that let every GPU target be tested without a GPU.

Tests that need Vulkan skip (saying why) on a developer's machine without it, but a CI machine missing lavapipe
or spirv-val is a broken setup: there the whole run fails loudly, here, instead of quietly testing less.
"""

import shutil

from conftest import bt_spirv_missing, bt_target_missing


def test_the_spirv_target_runs_here():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")


def test_spirv_val_is_here():
    if shutil.which("spirv-val") is None:
        bt_spirv_missing("spirv-val is missing (apt-get install spirv-tools)")
