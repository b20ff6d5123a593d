# SPDX-License-Identifier: MIT
"""xport's Python bindings. ``import xport.torch`` registers the
torch.distributed backend ``"xport"``."""
