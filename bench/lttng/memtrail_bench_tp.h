/* memtrail_bench_tp.h — the LTTng-UST tracepoint bench/lttng/lttng_fire.c
 * fires: an allocation-like event with the fields memtrail's event engine
 * records (type, category, size, address, old_address, site, key, value,
 * data_len; LTTng adds its own timestamp, the CPU is its buffer's and the
 * thread id comes from the vtid context the run script adds). Read twice by
 * the provider (lttng_tp.c), as LTTng-UST's tracepoint headers require. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER memtrail_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./memtrail_bench_tp.h"

#if !defined(MEMTRAIL_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define MEMTRAIL_BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    memtrail_bench, alloc,
    LTTNG_UST_TP_ARGS(uint16_t, type, uint16_t, category, uint64_t, size, uint64_t, address, uint64_t,
                      old_address, uint64_t, site, uint64_t, key, uint64_t, value, uint32_t, data_len),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint16_t, type,
                                                type) lttng_ust_field_integer(uint16_t, category, category)
                            lttng_ust_field_integer(uint64_t, size, size)
                                lttng_ust_field_integer_hex(uint64_t, address, address)
                                    lttng_ust_field_integer_hex(uint64_t, old_address, old_address)
                                        lttng_ust_field_integer_hex(uint64_t, site, site)
                                            lttng_ust_field_integer(uint64_t, key, key)
                                                lttng_ust_field_integer(uint64_t, value, value)
                                                    lttng_ust_field_integer(uint32_t, data_len, data_len)))

#endif /* MEMTRAIL_BENCH_TP_H */

#include <lttng/tracepoint-event.h>
