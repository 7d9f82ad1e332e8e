// SPDX-License-Identifier: GPL-2.0-only
/* Probe: MODULE_IMPORT_NS takes a bare identifier (a string from 6.13). */
#include <linux/module.h>

MODULE_IMPORT_NS(DMA_BUF);
MODULE_LICENSE("GPL");
