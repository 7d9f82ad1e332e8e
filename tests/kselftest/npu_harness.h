/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kselftest_harness.h as the npu kselftests include it.
 *
 * The harness of some kernel versions does not build warning-free with
 * -Wextra (an unused signal handler parameter); silence exactly that for
 * the harness only, so that the tests themselves keep -Werror.
 */
#ifndef __NPU_HARNESS_H__
#define __NPU_HARNESS_H__

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#endif /* __NPU_HARNESS_H__ */
