// SPDX-License-Identifier: GPL-2.0-only
/*
 * Probe: pin_user_pages() takes a vmas array (it went away in 6.5).
 */
#include <linux/module.h>
#include <linux/mm.h>

static long probe_pin(unsigned long start, struct page **pages)
{
	return pin_user_pages(start, 1, FOLL_LONGTERM, pages, NULL);
}

long (*const probe_ref)(unsigned long start, struct page **pages) = probe_pin;
MODULE_LICENSE("GPL");
