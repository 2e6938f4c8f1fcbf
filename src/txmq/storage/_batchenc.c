/* txmq.storage._batchenc: the store's per-record loops of a batched append, in C.
 *
 * The pure-Python reference lives in txmq/storage/codec.py (encode_batch_into's Python path) and
 * txmq/storage/index.py (blake2b-8 key digests, entry packing); the property tests hold this module
 * to them byte for byte. Nothing here decides anything: the same records, the same bytes.
 *
 *   encode_batch(buf, pos, physical_offset, sizes, queue_ids, flags, queue_offsets, sys_flags,
 *                born_ms, store_ms, tags_codes, reconsume_times, prepared_offsets, names, properties,
 *                bodies) -> list[int]
 *       Encodes every record (the layout of codec.py's docstring: header, names part, properties,
 *       body, CRC32C over bytes [12, size)) back to back at buf[pos:], the first at log offset
 *       physical_offset; returns each record's log offset. Every column is a sequence of one value
 *       per record; names is the record's pre-built names part (codec._names_part). Every size is
 *       checked against the record's parts and every write against the buffer's length before a
 *       byte is written; out-of-range field values raise struct.error (as struct.pack_into does).
 *   key_digests(keys) -> bytes
 *       blake2b(key.encode(), digest_size=8).digest() of every key (a str), joined.
 *   pack_entries(digests, offsets, store_ms) -> bytes
 *       The key index's 24-byte entries: digest (8 bytes as given), offset i64, store_ms i64.
 *   offset_ids(prefix, offsets) -> list[str]
 *       prefix + f"{offset:016X}" of every offset (0 <= offset < 2**64): the send lane's offset ids.
 *   encode_record(buf, pos, fields, store_host, queue_offset, physical_offset, store_ms) -> int
 *       One record (codec.encode_into; fields is an api.RecordFields) at buf[pos:]: every field and the
 *       buffer's room checked before a byte is written, the Python path's errors; returns its size.
 *   pack_units(offsets, sizes, tags_codes, start) -> bytes
 *       The ConsumeQueue's 20-byte units (offset i64, size i32, tags code i64) of the records from
 *       index start on (consume_queue.ConsumeQueue.put_run).
 *   index_add(head, offsets, stamps, previous, pending, keys, offset, store_ms) -> None
 *       One record's key index entries, key by key as index.KeyIndex._add_keys_py makes them (the
 *       hash, the head dict, the three arrays, the packed entry appended to pending); a key seen a
 *       moment ago (a transaction's half and its committed message) takes its digest from a small
 *       memo of recent keys instead of hashing it again.
 *   index_add_fresh(head, offsets, stamps, previous, pending, rows, record_offsets, store_ms) -> bool
 *       A batch's key index entries in one call when every key is fresh and distinct (rows: each
 *       record's keys): what key_digests, head_extend, the arrays' extends and pack_entries give
 *       together (index.KeyIndex.add_batch); False, nothing changed, for anything else.
 *   head_extend(head, digests, first) -> bool
 *       The key index's head dict given hash -> first + i for every 8-byte digest (read big-endian)
 *       when none is in it yet and none repeats, else False and head unchanged
 *       (index.ActiveEntries.extend_new's rule).
 *   Head()
 *       The key index's head (hash -> newest entry position) as a C table: a mapping of ints iterated
 *       in first-insertion order, as the dict it replaces; every index_* function and head_extend
 *       take a dict or a Head.
 *   columns_fit(topic, columns, queue_id_max, body_max, properties_max) -> bool
 *       True when a batch's columns surely pass store._check_records' column checks (False: the
 *       Python checks judge).
 *   record_sizes(fixed, properties, bodies) -> list[int] | None
 *       codec.batch_sizes' loop for a batch of one topic and born host (None: the loop judges).
 *   crc32c(data, value=0) -> int, crc32c_table(data, value=0) -> int, hardware() -> bool
 *       CRC32C (Castagnoli) as crc32c.crc32c computes it; the table one is the portable path,
 *       exposed so the tests can hold both to the reference on a machine with SSE4.2.
 *
 * Written for txmq from the CRC32C definition (reflected polynomial 0x82F63B78) and RFC 7693
 * (BLAKE2b); no code copied from elsewhere.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TXMQ_X86_CRC 1
#include <nmmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TXMQ_X86_AVX2 1
#include <immintrin.h>
static int b2_avx2; /* set at import (crc_init): the CPU runs AVX2 (blake2b_8_many's four lanes) */
#endif

static PyObject *struct_error; /* struct.error: what struct.pack_into raises for a bad field */

/* ------------------------------------------------------------------ CRC32C */

static uint32_t crc_table[8][256];
static int crc_hw;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
#ifdef TXMQ_X86_CRC
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#ifdef TXMQ_X86_AVX2
    b2_avx2 = __builtin_cpu_supports("avx2");
#endif
#endif
}

/* the running (pre-inverted) state over data: slicing by 8, little-endian word loads done bytewise */
static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF]
            ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]]
            ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#ifdef TXMQ_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* x86 is little-endian: the word's bytes in stream order */
        c64 = _mm_crc32_u64(c64, word);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
#endif
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

static uint32_t crc32c_update(uint32_t value, const unsigned char *p, size_t n)
{
    uint32_t c = ~value;
#ifdef TXMQ_X86_CRC
    if (crc_hw)
        return ~crc_sse42(c, p, n);
#endif
    return ~crc_sw(c, p, n);
}

static PyObject *crc_common(PyObject *const *args, Py_ssize_t nargs, int table_only)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data, value=0)");
        return NULL;
    }
    unsigned long value = 0;
    if (nargs == 2) {
        value = PyLong_AsUnsignedLong(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (value > 0xFFFFFFFFul) {
            PyErr_SetString(PyExc_OverflowError, "value must fit in 32 bits");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = table_only ? ~crc_sw(~(uint32_t)value, view.buf, (size_t)view.len)
                            : crc32c_update((uint32_t)value, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *py_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return crc_common(args, nargs, 0);
}

static PyObject *py_crc32c_table(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return crc_common(args, nargs, 1);
}

static PyObject *py_hardware(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(crc_hw);
}

/* ------------------------------------------------------------------ batch encode */

static inline void put_u16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put_u64(unsigned char *p, uint64_t v)
{
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

/* an integer field: i64 (bits 64) or i32 (bits 32); struct.error on anything else, as struct does */
static int get_int(PyObject *obj, int bits, int64_t *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || (bits == 32 && (v < INT32_MIN || v > INT32_MAX))) {
        if (bits == 32)
            PyErr_SetString(struct_error, "'i' format requires -2147483648 <= number <= 2147483647");
        else
            PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* a bytes-like part: bytes directly, anything else through the buffer protocol (released by caller) */
static int get_bytes(PyObject *obj, Py_buffer *view, int *held)
{
    if (PyBytes_CheckExact(obj)) {
        view->buf = PyBytes_AS_STRING(obj);
        view->len = PyBytes_GET_SIZE(obj);
        *held = 0;
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    *held = 1;
    return 0;
}

enum { COL_SIZES, COL_QUEUE_IDS, COL_FLAGS, COL_QUEUE_OFFSETS, COL_SYS_FLAGS, COL_BORN, COL_TAGS,
       COL_RECONSUME, COL_PREPARED, COL_NAMES, COL_PROPERTIES, COL_BODIES, COLS };

#define HEADER_BYTES 76
#define MAGIC 0x54584D31u

/* A record's 76-byte header (codec.HEADER, big-endian) at p, the CRC32C at p + 8 left for later: the
   values are range-checked by the caller, each stored as its field's width keeps it */
static inline void put_header(unsigned char *p, int64_t size, int64_t queue_id, int64_t flag, int64_t queue_offset,
                              int64_t offset, int64_t sys_flag, int64_t born, int64_t store_ms, int64_t tags,
                              int64_t reconsume, int64_t prepared)
{
    put_u32(p, MAGIC);
    put_u32(p + 4, (uint32_t)size);
    put_u32(p + 12, (uint32_t)queue_id);
    put_u32(p + 16, (uint32_t)flag);
    put_u64(p + 20, (uint64_t)queue_offset);
    put_u64(p + 28, (uint64_t)offset);
    put_u32(p + 36, (uint32_t)sys_flag);
    put_u64(p + 40, (uint64_t)born);
    put_u64(p + 48, (uint64_t)store_ms);
    put_u64(p + 56, (uint64_t)tags);
    put_u32(p + 64, (uint32_t)reconsume);
    put_u64(p + 68, (uint64_t)prepared);
}

static PyObject *py_encode_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "encode_batch takes 16 arguments");
        return NULL;
    }
    /* args: buf, pos, physical_offset, sizes, queue_ids, flags, queue_offsets, sys_flags, born_ms,
       store_ms, tags_codes, reconsume_times, prepared_offsets, names, properties, bodies */
    static const int col_arg[COLS] = {3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15};
    PyObject *cols[COLS] = {NULL};
    PyObject *result = NULL;
    Py_buffer out = {0};
    int have_out = 0;
    int64_t pos, physical, store_ms;

    if (get_int(args[1], 64, &pos) < 0 || get_int(args[2], 64, &physical) < 0
        || get_int(args[9], 64, &store_ms) < 0)
        return NULL;
    Py_ssize_t count = -1;
    for (int c = 0; c < COLS; c++) {
        /* a tuple each (a list copied): no column can change under the loop's borrowed items */
        cols[c] = PySequence_Tuple(args[col_arg[c]]);
        if (cols[c] == NULL)
            goto done;
        Py_ssize_t n = PyTuple_GET_SIZE(cols[c]);
        if (count < 0)
            count = n;
        else if (n != count) {
            PyErr_SetString(PyExc_ValueError, "encode_batch: the columns differ in length");
            goto done;
        }
    }
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0)
        goto done;
    have_out = 1;
    if (pos < 0 || pos > out.len) {
        PyErr_SetString(struct_error, "encode_batch: pos is outside the buffer");
        goto done;
    }
    result = PyList_New(count);
    if (result == NULL)
        goto done;
    unsigned char *base = (unsigned char *)out.buf;
    int64_t at = pos;
    int64_t offset = physical;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item[COLS];
        for (int c = 0; c < COLS; c++)
            item[c] = PyTuple_GET_ITEM(cols[c], i);
        int64_t size, queue_id, flag, queue_offset, sys_flag, born, tags, reconsume, prepared;
        if (get_int(item[COL_SIZES], 64, &size) < 0 || get_int(item[COL_QUEUE_IDS], 32, &queue_id) < 0
            || get_int(item[COL_FLAGS], 32, &flag) < 0 || get_int(item[COL_QUEUE_OFFSETS], 64, &queue_offset) < 0
            || get_int(item[COL_SYS_FLAGS], 32, &sys_flag) < 0 || get_int(item[COL_BORN], 64, &born) < 0
            || get_int(item[COL_TAGS], 64, &tags) < 0 || get_int(item[COL_RECONSUME], 32, &reconsume) < 0
            || get_int(item[COL_PREPARED], 64, &prepared) < 0)
            goto fail;
        Py_buffer names, props, body;
        int names_held = 0, props_held = 0, body_held = 0, bad = 0;
        if (get_bytes(item[COL_NAMES], &names, &names_held) < 0)
            goto fail;
        if (get_bytes(item[COL_PROPERTIES], &props, &props_held) < 0) {
            bad = 1;
        }
        else if (get_bytes(item[COL_BODIES], &body, &body_held) < 0) {
            bad = 1;
        }
        else if (props.len > 0xFFFF) {
            PyErr_SetString(struct_error, "'H' format requires 0 <= number <= 65535");
            bad = 1;
        }
        else if ((uint64_t)body.len > 0xFFFFFFFFull) {
            PyErr_SetString(struct_error, "'I' format requires 0 <= number <= 4294967295");
            bad = 1;
        }
        else if (size != (int64_t)HEADER_BYTES + names.len + 2 + props.len + 4 + body.len
                 || size > 0xFFFFFFFFll) {
            PyErr_SetString(PyExc_ValueError, "encode_batch: a size does not match its record's parts");
            bad = 1;
        }
        else if (size > out.len - at) {
            PyErr_SetString(struct_error, "encode_batch: the buffer is too small for the batch");
            bad = 1;
        }
        if (!bad) {
            unsigned char *p = base + at;
            put_header(p, size, queue_id, flag, queue_offset, offset, sys_flag, born, store_ms, tags, reconsume,
                       prepared);
            unsigned char *q = p + HEADER_BYTES;
            memcpy(q, names.buf, (size_t)names.len);
            q += names.len;
            put_u16(q, (uint32_t)props.len);
            memcpy(q + 2, props.buf, (size_t)props.len);
            q += 2 + props.len;
            put_u32(q, (uint32_t)body.len);
            memcpy(q + 4, body.buf, (size_t)body.len);
            put_u32(p + 8, crc32c_update(0, p + 12, (size_t)size - 12));
        }
        if (names_held)
            PyBuffer_Release(&names);
        if (props_held)
            PyBuffer_Release(&props);
        if (body_held)
            PyBuffer_Release(&body);
        if (bad)
            goto fail;
        PyObject *o = PyLong_FromLongLong(offset);
        if (o == NULL)
            goto fail;
        PyList_SET_ITEM(result, i, o);
        at += size;
        offset += size;
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    if (have_out)
        PyBuffer_Release(&out);
    for (int c = 0; c < COLS; c++)
        Py_XDECREF(cols[c]);
    return result;
}

/* ------------------------------------------------------------------ BLAKE2b-64 (RFC 7693) */

static const uint64_t b2_iv[8] = {
    0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull, 0x3C6EF372FE94F82Bull, 0xA54FF53A5F1D36F1ull,
    0x510E527FADE682D1ull, 0x9B05688C2B3E6C1Full, 0x1F83D9ABFB41BD6Bull, 0x5BE0CD19137E2179ull,
};

static const uint8_t b2_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, int n)
{
    return (x >> n) | (x << (64 - n));
}

static inline uint64_t load64_le(const unsigned char *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#endif
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24
           | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

#define B2_G(a, b, c, d, x, y)          \
    do {                                \
        v[a] = v[a] + v[b] + (x);       \
        v[d] = rotr64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];             \
        v[b] = rotr64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);       \
        v[d] = rotr64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];             \
        v[b] = rotr64(v[b] ^ v[c], 63); \
    } while (0)

/* F: compress one 128-byte block into h; t = bytes hashed so far (inputs here are < 2^64 bytes) */
static void b2_compress(uint64_t h[8], const unsigned char block[128], uint64_t t, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++)
        m[i] = load64_le(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = b2_iv[i];
    }
    v[12] ^= t;
    /* v[13] ^= high word of t: always 0 */
    if (last)
        v[14] = ~v[14];
    /* the twelve rounds unrolled: each round's message schedule (b2_sigma) is then constant */
#define B2_ROUND(r)                                                       \
    do {                                                                  \
        B2_G(0, 4, 8, 12, m[b2_sigma[r][0]], m[b2_sigma[r][1]]);         \
        B2_G(1, 5, 9, 13, m[b2_sigma[r][2]], m[b2_sigma[r][3]]);         \
        B2_G(2, 6, 10, 14, m[b2_sigma[r][4]], m[b2_sigma[r][5]]);        \
        B2_G(3, 7, 11, 15, m[b2_sigma[r][6]], m[b2_sigma[r][7]]);        \
        B2_G(0, 5, 10, 15, m[b2_sigma[r][8]], m[b2_sigma[r][9]]);        \
        B2_G(1, 6, 11, 12, m[b2_sigma[r][10]], m[b2_sigma[r][11]]);      \
        B2_G(2, 7, 8, 13, m[b2_sigma[r][12]], m[b2_sigma[r][13]]);       \
        B2_G(3, 4, 9, 14, m[b2_sigma[r][14]], m[b2_sigma[r][15]]);       \
    } while (0)
    B2_ROUND(0);
    B2_ROUND(1);
    B2_ROUND(2);
    B2_ROUND(3);
    B2_ROUND(4);
    B2_ROUND(5);
    B2_ROUND(6);
    B2_ROUND(7);
    B2_ROUND(8);
    B2_ROUND(9);
    B2_ROUND(10);
    B2_ROUND(11);
#undef B2_ROUND
    for (int i = 0; i < 8; i++)
        h[i] ^= v[i] ^ v[i + 8];
}

/* blake2b with an 8-byte digest and no key: the digest's 8 bytes (h[0] little-endian) into out */
static void blake2b_8(const unsigned char *data, size_t n, unsigned char out[8])
{
    uint64_t h[8];
    memcpy(h, b2_iv, sizeof h);
    h[0] ^= 0x01010000ull ^ 8u; /* parameter block: depth 1, fanout 1, key length 0, digest length 8 */
    uint64_t t = 0;
    while (n > 128) {
        t += 128;
        b2_compress(h, data, t, 0);
        data += 128;
        n -= 128;
    }
    unsigned char block[128] = {0};
    memcpy(block, data, n);
    t += n;
    b2_compress(h, block, t, 1);
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(h[0] >> (8 * i));
}

#ifdef TXMQ_X86_AVX2

#define B2X_ROT32(x) _mm256_shuffle_epi32((x), _MM_SHUFFLE(2, 3, 0, 1))
#define B2X_ROT24(x) _mm256_shuffle_epi8((x), rot24)
#define B2X_ROT16(x) _mm256_shuffle_epi8((x), rot16)
#define B2X_ROT63(x) _mm256_or_si256(_mm256_srli_epi64((x), 63), _mm256_add_epi64((x), (x)))
#define B2X_G(a, b, c, d, x, y)                                                  \
    do {                                                                         \
        v[a] = _mm256_add_epi64(_mm256_add_epi64(v[a], v[b]), (x));              \
        v[d] = B2X_ROT32(_mm256_xor_si256(v[d], v[a]));                          \
        v[c] = _mm256_add_epi64(v[c], v[d]);                                     \
        v[b] = B2X_ROT24(_mm256_xor_si256(v[b], v[c]));                          \
        v[a] = _mm256_add_epi64(_mm256_add_epi64(v[a], v[b]), (y));              \
        v[d] = B2X_ROT16(_mm256_xor_si256(v[d], v[a]));                          \
        v[c] = _mm256_add_epi64(v[c], v[d]);                                     \
        v[b] = B2X_ROT63(_mm256_xor_si256(v[b], v[c]));                          \
    } while (0)

/* blake2b_8 of four inputs at once, each at most one block (n[i] <= 128): lane i of every 256-bit
   word is input i's 64-bit word, so the four compressions run side by side; the same arithmetic as
   b2_compress (RFC 7693's F with the final flag) and so the same digests as blake2b_8. */
__attribute__((target("avx2"))) static void blake2b_8_x4(const unsigned char *const p[4], const size_t n[4],
                                                         unsigned char *const out[4])
{
    unsigned char blocks[4][128];
    for (int i = 0; i < 4; i++) {
        memset(blocks[i], 0, 128);
        memcpy(blocks[i], p[i], n[i]);
    }
    const __m256i rot24 = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10, 3, 4, 5, 6, 7, 0, 1,
                                           2, 11, 12, 13, 14, 15, 8, 9, 10);
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9, 2, 3, 4, 5, 6, 7, 0,
                                           1, 10, 11, 12, 13, 14, 15, 8, 9);
    __m256i m[16], v[16];
    for (int w = 0; w < 16; w += 4) {
        /* the four inputs' words w..w+3, transposed: m[w + j] lane i = input i's word w + j */
        __m256i r0 = _mm256_loadu_si256((const __m256i *)(blocks[0] + 8 * w));
        __m256i r1 = _mm256_loadu_si256((const __m256i *)(blocks[1] + 8 * w));
        __m256i r2 = _mm256_loadu_si256((const __m256i *)(blocks[2] + 8 * w));
        __m256i r3 = _mm256_loadu_si256((const __m256i *)(blocks[3] + 8 * w));
        __m256i t0 = _mm256_unpacklo_epi64(r0, r1); /* 0w 1w 0w+2 1w+2 */
        __m256i t1 = _mm256_unpackhi_epi64(r0, r1); /* 0w+1 1w+1 0w+3 1w+3 */
        __m256i t2 = _mm256_unpacklo_epi64(r2, r3);
        __m256i t3 = _mm256_unpackhi_epi64(r2, r3);
        m[w] = _mm256_permute2x128_si256(t0, t2, 0x20);
        m[w + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
        m[w + 2] = _mm256_permute2x128_si256(t0, t2, 0x31);
        m[w + 3] = _mm256_permute2x128_si256(t1, t3, 0x31);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm256_set1_epi64x((long long)(i == 0 ? b2_iv[0] ^ 0x01010000ull ^ 8u : b2_iv[i]));
        v[i + 8] = _mm256_set1_epi64x((long long)b2_iv[i]);
    }
    v[12] = _mm256_xor_si256(v[12], _mm256_setr_epi64x((long long)n[0], (long long)n[1], (long long)n[2],
                                                       (long long)n[3]));
    v[14] = _mm256_xor_si256(v[14], _mm256_set1_epi64x(-1));
    const __m256i h0 = v[0];
#define B2X_ROUND(r)                                                      \
    do {                                                                  \
        B2X_G(0, 4, 8, 12, m[b2_sigma[r][0]], m[b2_sigma[r][1]]);        \
        B2X_G(1, 5, 9, 13, m[b2_sigma[r][2]], m[b2_sigma[r][3]]);        \
        B2X_G(2, 6, 10, 14, m[b2_sigma[r][4]], m[b2_sigma[r][5]]);       \
        B2X_G(3, 7, 11, 15, m[b2_sigma[r][6]], m[b2_sigma[r][7]]);       \
        B2X_G(0, 5, 10, 15, m[b2_sigma[r][8]], m[b2_sigma[r][9]]);       \
        B2X_G(1, 6, 11, 12, m[b2_sigma[r][10]], m[b2_sigma[r][11]]);     \
        B2X_G(2, 7, 8, 13, m[b2_sigma[r][12]], m[b2_sigma[r][13]]);      \
        B2X_G(3, 4, 9, 14, m[b2_sigma[r][14]], m[b2_sigma[r][15]]);      \
    } while (0)
    B2X_ROUND(0);
    B2X_ROUND(1);
    B2X_ROUND(2);
    B2X_ROUND(3);
    B2X_ROUND(4);
    B2X_ROUND(5);
    B2X_ROUND(6);
    B2X_ROUND(7);
    B2X_ROUND(8);
    B2X_ROUND(9);
    B2X_ROUND(10);
    B2X_ROUND(11);
#undef B2X_ROUND
    uint64_t h[4];
    _mm256_storeu_si256((__m256i *)h, _mm256_xor_si256(h0, _mm256_xor_si256(v[0], v[8])));
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 8; b++)
            out[i][b] = (unsigned char)(h[i] >> (8 * b));
}
#endif

/* blake2b_8 of count inputs (p[i], n[i]) into out + 8 * i: with AVX2, inputs of at most one block
   are hashed four at a time (blake2b_8_x4); the rest, and everything without AVX2, one by one. */
static void blake2b_8_many(const unsigned char *const *p, const size_t *n, Py_ssize_t count, unsigned char *out)
{
#ifdef TXMQ_X86_AVX2
    if (b2_avx2) {
        const unsigned char *lp[4];
        size_t ln[4];
        unsigned char *lo[4];
        int lanes = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (n[i] > 128) {
                blake2b_8(p[i], n[i], out + 8 * i);
                continue;
            }
            lp[lanes] = p[i];
            ln[lanes] = n[i];
            lo[lanes] = out + 8 * i;
            if (++lanes == 4) {
                blake2b_8_x4(lp, ln, lo);
                lanes = 0;
            }
        }
        if (lanes >= 2) { /* two or three left: one more four-lane pass, the spare lanes thrown away */
            unsigned char spare[8];
            for (int i = lanes; i < 4; i++) {
                lp[i] = lp[0];
                ln[i] = ln[0];
                lo[i] = spare;
            }
            blake2b_8_x4(lp, ln, lo);
        } else if (lanes == 1) {
            blake2b_8(lp[0], ln[0], lo[0]);
        }
        return;
    }
#endif
    for (Py_ssize_t i = 0; i < count; i++)
        blake2b_8(p[i], n[i], out + 8 * i);
}

static PyObject *py_key_digests(PyObject *self, PyObject *keys)
{
    PyObject *seq = PySequence_Fast(keys, "key_digests: keys must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = PyBytes_FromStringAndSize(NULL, count * 8);
    if (result == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    /* every key's UTF-8 first (its errors in key order), then the digests (blake2b_8_many); the
       pointers stay valid while seq holds the keys */
    const unsigned char **ptrs = PyMem_Malloc((size_t)(count ? count : 1) * sizeof *ptrs);
    size_t *lens = PyMem_Malloc((size_t)(count ? count : 1) * sizeof *lens);
    if (ptrs == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(key)) {
            PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute 'encode'", Py_TYPE(key)->tp_name);
            goto fail;
        }
        Py_ssize_t len;
        const char *utf8 = PyUnicode_AsUTF8AndSize(key, &len); /* UnicodeEncodeError as str.encode */
        if (utf8 == NULL)
            goto fail;
        ptrs[i] = (const unsigned char *)utf8;
        lens[i] = (size_t)len;
    }
    blake2b_8_many(ptrs, lens, count, out);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    Py_DECREF(seq);
    return result;
fail:
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    Py_DECREF(seq);
    Py_DECREF(result);
    return NULL;
}

static PyObject *py_pack_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "pack_entries(digests, offsets, store_ms)");
        return NULL;
    }
    int64_t store_ms;
    if (get_int(args[2], 64, &store_ms) < 0)
        return NULL;
    Py_buffer digests;
    if (PyObject_GetBuffer(args[0], &digests, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(args[1], "pack_entries: offsets must be a sequence");
    PyObject *result = NULL;
    if (seq == NULL)
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (digests.len != count * 8) {
        PyErr_SetString(PyExc_ValueError, "pack_entries: one 8-byte digest per offset");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, count * 24);
    if (result == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    const unsigned char *d = digests.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t offset;
        if (get_int(PySequence_Fast_GET_ITEM(seq, i), 64, &offset) < 0) {
            Py_CLEAR(result);
            goto done;
        }
        memcpy(out + 24 * i, d + 8 * i, 8);
        put_u64(out + 24 * i + 8, (uint64_t)offset);
        put_u64(out + 24 * i + 16, (uint64_t)store_ms);
    }
done:
    Py_XDECREF(seq);
    PyBuffer_Release(&digests);
    return result;
}

/* ------------------------------------------------------------------ offset message ids */

static PyObject *py_offset_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char hex[] = "0123456789ABCDEF";
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "offset_ids(prefix: str, offsets)");
        return NULL;
    }
    PyObject *prefix = args[0];
    int ascii = PyUnicode_IS_ASCII(prefix);
    Py_ssize_t plen = PyUnicode_GET_LENGTH(prefix);
    PyObject *seq = PySequence_Fast(args[1], "offset_ids: offsets must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = PyList_New(count);
    if (result == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item)) {
            PyErr_SetString(struct_error, "required argument is not an integer");
            goto fail;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(item); /* OverflowError if < 0 or >= 2^64 */
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            goto fail;
        char digits[16];
        for (int k = 15; k >= 0; k--, v >>= 4)
            digits[k] = hex[v & 0xF];
        PyObject *text;
        if (ascii) {
            text = PyUnicode_New(plen + 16, 127);
            if (text == NULL)
                goto fail;
            Py_UCS1 *data = PyUnicode_1BYTE_DATA(text);
            memcpy(data, PyUnicode_1BYTE_DATA(prefix), (size_t)plen);
            memcpy(data + plen, digits, 16);
        }
        else {
            PyObject *tail = PyUnicode_FromStringAndSize(digits, 16);
            if (tail == NULL)
                goto fail;
            text = PyUnicode_Concat(prefix, tail);
            Py_DECREF(tail);
            if (text == NULL)
                goto fail;
        }
        PyList_SET_ITEM(result, i, text);
    }
    Py_DECREF(seq);
    return result;
fail:
    Py_XDECREF(result);
    Py_DECREF(seq);
    return NULL;
}

/* ------------------------------------------------------------------ one record (codec.encode_into) */

/* an integer header field as struct packs it (">i": kind 'i', ">q": kind 'q'): objects with __index__
   are taken, anything else is struct.error; out of range raises struct's own message for the kind */
static int get_field(PyObject *obj, char kind, int64_t *out)
{
    PyObject *number;
    if (PyLong_Check(obj)) {
        number = obj;
        Py_INCREF(number);
    }
    else if (PyIndex_Check(obj)) {
        number = PyNumber_Index(obj);
        if (number == NULL)
            return -1;
    }
    else {
        PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
    Py_DECREF(number);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_SetString(struct_error, kind == 'q' ? "int too large to convert" : "argument out of range");
        return -1;
    }
    if (kind == 'i' && (v < INT32_MIN || v > INT32_MAX)) {
        PyErr_SetString(struct_error, "'i' format requires -2147483648 <= number <= 2147483647");
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* the RecordFields items encode_record reads (api.RecordFields' order) */
enum { RF_TOPIC, RF_QUEUE_ID, RF_BODY, RF_PROPERTIES, RF_TAGS, RF_FLAG, RF_SYS_FLAG, RF_BORN, RF_BORN_HOST,
       RF_RECONSUME, RF_PREPARED, RF_READ };

static PyObject *py_encode_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_record(buf, pos, fields, store_host, queue_offset, physical_offset, store_ms)");
        return NULL;
    }
    PyObject *fields = args[2];
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) < RF_READ) {
        PyErr_SetString(PyExc_TypeError, "encode_record: fields must be a RecordFields");
        return NULL;
    }
    PyObject *topic = PyTuple_GET_ITEM(fields, RF_TOPIC);
    PyObject *born_host = PyTuple_GET_ITEM(fields, RF_BORN_HOST);
    PyObject *store_host = args[3];
    if (!PyBytes_Check(topic) || !PyBytes_Check(born_host) || !PyBytes_Check(store_host)) {
        PyErr_SetString(PyExc_TypeError, "encode_record: the topic and hosts must be bytes");
        return NULL;
    }
    Py_ssize_t topic_len = PyBytes_GET_SIZE(topic), born_len = PyBytes_GET_SIZE(born_host);
    Py_ssize_t store_len = PyBytes_GET_SIZE(store_host);
    /* codec._names_part: the lengths' to_bytes(2 / 1, "big") */
    if (topic_len > 0xFFFF || born_len > 0xFF || store_len > 0xFF) {
        PyErr_SetString(PyExc_OverflowError, "int too big to convert");
        return NULL;
    }
    Py_ssize_t names_len = 2 + topic_len + 1 + born_len + 1 + store_len;
    int64_t pos, queue_offset, physical, store_ms;
    if (get_int(args[1], 64, &pos) < 0)
        return NULL;
    Py_buffer out, props, body;
    int props_held = 0, body_held = 0;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0)
        return NULL;
    if (get_bytes(PyTuple_GET_ITEM(fields, RF_PROPERTIES), &props, &props_held) < 0)
        goto done;
    if (get_bytes(PyTuple_GET_ITEM(fields, RF_BODY), &body, &body_held) < 0)
        goto done;
    int64_t size = (int64_t)HEADER_BYTES + names_len + 2 + props.len + 4 + body.len;
    /* struct.pack_into's checks of the header's place, then of the whole record's (the Python path
       writes nothing past a buffer's end either: its header pack raises first, and the writer's buffer
       always holds the record) */
    if (pos < 0) {
        PyErr_Format(struct_error, "offset %lld out of range for %zd-byte buffer", (long long)pos, out.len);
        goto done;
    }
    if (pos > out.len || out.len - pos < size) {
        PyErr_Format(struct_error,
                     "pack_into requires a buffer of at least %lld bytes for packing %lld bytes at offset %lld "
                     "(actual buffer size is %zd)",
                     (long long)(pos + size), (long long)size, (long long)pos, out.len);
        goto done;
    }
    /* the header's fields in codec.HEADER's order, as its pack_into checks them */
    int64_t queue_id, flag, sys_flag, born, tags, reconsume, prepared;
    if (size > 0xFFFFFFFFll) {
        PyErr_SetString(struct_error, "'I' format requires 0 <= number <= 4294967295");
        goto done;
    }
    if (get_field(PyTuple_GET_ITEM(fields, RF_QUEUE_ID), 'i', &queue_id) < 0
        || get_field(PyTuple_GET_ITEM(fields, RF_FLAG), 'i', &flag) < 0
        || get_field(args[4], 'q', &queue_offset) < 0 || get_field(args[5], 'q', &physical) < 0
        || get_field(PyTuple_GET_ITEM(fields, RF_SYS_FLAG), 'i', &sys_flag) < 0
        || get_field(PyTuple_GET_ITEM(fields, RF_BORN), 'q', &born) < 0
        || get_field(args[6], 'q', &store_ms) < 0 || get_field(PyTuple_GET_ITEM(fields, RF_TAGS), 'q', &tags) < 0
        || get_field(PyTuple_GET_ITEM(fields, RF_RECONSUME), 'i', &reconsume) < 0
        || get_field(PyTuple_GET_ITEM(fields, RF_PREPARED), 'q', &prepared) < 0)
        goto done;
    if (props.len > 0xFFFF) {
        PyErr_SetString(struct_error, "'H' format requires 0 <= number <= 65535");
        goto done;
    }
    unsigned char *p = (unsigned char *)out.buf + pos;
    put_header(p, size, queue_id, flag, queue_offset, physical, sys_flag, born, store_ms, tags, reconsume, prepared);
    unsigned char *q = p + HEADER_BYTES;
    put_u16(q, (uint32_t)topic_len);
    memcpy(q + 2, PyBytes_AS_STRING(topic), (size_t)topic_len);
    q += 2 + topic_len;
    *q = (unsigned char)born_len;
    memcpy(q + 1, PyBytes_AS_STRING(born_host), (size_t)born_len);
    q += 1 + born_len;
    *q = (unsigned char)store_len;
    memcpy(q + 1, PyBytes_AS_STRING(store_host), (size_t)store_len);
    q += 1 + store_len;
    put_u16(q, (uint32_t)props.len);
    memcpy(q + 2, props.buf, (size_t)props.len);
    q += 2 + props.len;
    put_u32(q, (uint32_t)body.len);
    memcpy(q + 4, body.buf, (size_t)body.len);
    put_u32(p + 8, crc32c_update(0, p + 12, (size_t)size - 12));
    result = PyLong_FromLongLong(size);
done:
    if (body_held)
        PyBuffer_Release(&body);
    if (props_held)
        PyBuffer_Release(&props);
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------ module */

/* ------------------------------------------------------------------ dispatch: units, index head */

/* pack_units(offsets, sizes, tags_codes, start) -> bytes: the ConsumeQueue's 20-byte units (offset
   i64, size i32, tags code i64, big-endian: consume_queue.UNIT) of the records from index start on;
   struct.error on a value out of range, as struct.pack does */
static PyObject *py_pack_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pack_units(offsets, sizes, tags_codes, start)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    PyObject *cols[3] = {NULL, NULL, NULL};
    PyObject *result = NULL;
    Py_ssize_t count = -1;
    for (int c = 0; c < 3; c++) {
        cols[c] = PySequence_Fast(args[c], "pack_units: columns must be sequences");
        if (cols[c] == NULL)
            goto done;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(cols[c]);
        if (count < 0)
            count = n;
        else if (n != count) {
            PyErr_SetString(PyExc_ValueError, "pack_units: the columns differ in length");
            goto done;
        }
    }
    if (start < 0 || start > count) {
        PyErr_SetString(PyExc_ValueError, "pack_units: start is outside the columns");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (count - start) * 20);
    if (result == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = start; i < count; i++, out += 20) {
        int64_t offset, size, code;
        if (get_int(PySequence_Fast_GET_ITEM(cols[0], i), 64, &offset) < 0
            || get_int(PySequence_Fast_GET_ITEM(cols[1], i), 32, &size) < 0
            || get_int(PySequence_Fast_GET_ITEM(cols[2], i), 64, &code) < 0) {
            Py_CLEAR(result);
            goto done;
        }
        put_u64(out, (uint64_t)offset);
        put_u32(out + 8, (uint32_t)size);
        put_u64(out + 12, (uint64_t)code);
    }
done:
    for (int c = 0; c < 3; c++)
        Py_XDECREF(cols[c]);
    return result;
}

/* ------------------------------------------------------------------ index: the active file's head */

/* Head: the key index's head (index.ActiveEntries.head: a key hash -> the position of its newest
   entry) as a C table instead of a dict of ints, so a batch's fresh keys cost no int object, dict
   probe or resize each. Open addressing with linear probing, at most half full; the hashes are kept
   in first-insertion order too, so it iterates as the dict would (items(), keys(), values(), iter),
   and compares equal to a dict with the same items. Keys are ints in [0, 2**64), values ints in
   [0, 2**63); nothing is deleted (the index drops the whole head when the file is sealed). The
   index_* functions below take a dict or a Head; index.py makes a Head when this module is built. */
typedef struct {
    PyObject_HEAD
    uint64_t *keys;
    int64_t *vals;      /* the position, -1: an empty slot */
    uint64_t *order;    /* the hashes in first-insertion order (used of them) */
    Py_ssize_t used;    /* hashes held */
    Py_ssize_t cap;     /* slots: 0 (nothing allocated) or a power of two */
    Py_ssize_t order_cap;
} HeadObject;

static PyTypeObject HeadType;
#define HEAD_CHECK(o) (Py_TYPE(o) == &HeadType)

static inline Py_ssize_t head_probe(const HeadObject *t, uint64_t h)
{
    size_t mask = (size_t)t->cap - 1;
    uint64_t x = h * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(x ^ (x >> 32)) & mask;
    while (t->vals[i] >= 0 && t->keys[i] != h)
        i = (i + 1) & mask;
    return (Py_ssize_t)i;
}

/* room for `more` new hashes without a rehash (at most half full after them); -1: MemoryError, the
   table unchanged */
static int head_reserve(HeadObject *t, Py_ssize_t more)
{
    Py_ssize_t need = t->used + more;
    if (need > t->order_cap) {
        Py_ssize_t cap = t->order_cap ? t->order_cap : 32;
        while (cap < need)
            cap *= 2;
        uint64_t *order = PyMem_Realloc(t->order, (size_t)cap * sizeof(uint64_t));
        if (order == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->order = order;
        t->order_cap = cap;
    }
    if (need <= t->cap / 2)
        return 0;
    Py_ssize_t cap = t->cap ? t->cap : 64;
    while (cap / 2 < need)
        cap *= 2;
    uint64_t *keys = PyMem_Malloc((size_t)cap * sizeof(uint64_t));
    int64_t *vals = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    if (keys == NULL || vals == NULL) {
        PyMem_Free(keys);
        PyMem_Free(vals);
        PyErr_NoMemory();
        return -1;
    }
    memset(vals, 0xff, (size_t)cap * sizeof(int64_t)); /* every slot -1: empty */
    uint64_t *old_keys = t->keys;
    int64_t *old_vals = t->vals;
    Py_ssize_t old_cap = t->cap;
    t->keys = keys, t->vals = vals, t->cap = cap;
    for (Py_ssize_t i = 0; i < old_cap; i++)
        if (old_vals[i] >= 0) {
            Py_ssize_t j = head_probe(t, old_keys[i]);
            keys[j] = old_keys[i];
            vals[j] = old_vals[i];
        }
    PyMem_Free(old_keys);
    PyMem_Free(old_vals);
    return 0;
}

/* head[h] of a dict or a Head: 1 and *pos when present, 0 when not, -1 with an exception */
static int head_find(PyObject *head, uint64_t h, Py_ssize_t *pos)
{
    if (HEAD_CHECK(head)) {
        HeadObject *t = (HeadObject *)head;
        if (t->cap == 0)
            return 0;
        Py_ssize_t i = head_probe(t, h);
        if (t->vals[i] < 0)
            return 0;
        *pos = (Py_ssize_t)t->vals[i];
        return 1;
    }
    PyObject *hashed = PyLong_FromUnsignedLongLong(h);
    if (hashed == NULL)
        return -1;
    PyObject *before = PyDict_GetItemWithError(head, hashed); /* borrowed */
    Py_DECREF(hashed);
    if (before == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t value = PyLong_AsSsize_t(before);
    if (value == -1 && PyErr_Occurred())
        return -1;
    *pos = value;
    return 1;
}

/* head[h] = pos (0 <= pos) of a dict or a Head; -1 with an exception (memory only) */
static int head_store(PyObject *head, uint64_t h, Py_ssize_t pos)
{
    if (HEAD_CHECK(head)) {
        HeadObject *t = (HeadObject *)head;
        if (head_reserve(t, 1) < 0)
            return -1;
        Py_ssize_t i = head_probe(t, h);
        if (t->vals[i] < 0) {
            t->keys[i] = h;
            t->order[t->used++] = h;
        }
        t->vals[i] = (int64_t)pos;
        return 0;
    }
    PyObject *hashed = PyLong_FromUnsignedLongLong(h);
    PyObject *position = PyLong_FromSsize_t(pos);
    int rc = hashed == NULL || position == NULL ? -1 : PyDict_SetItem(head, hashed, position);
    Py_XDECREF(hashed);
    Py_XDECREF(position);
    return rc;
}

/* hashes[i] -> first + i for every hash when none is in the Head yet and none repeats: 1; else 0 and
   the table as it was (the new hashes taken back, newest first: linear probing's chains are then
   exactly as before); -1: MemoryError, the table unchanged */
static int head_add_fresh(HeadObject *t, const uint64_t *hashes, Py_ssize_t count, Py_ssize_t first,
                          Py_ssize_t *slots)
{
    if (count == 0)
        return 1;
    if (head_reserve(t, count) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t i = head_probe(t, hashes[k]);
        if (t->vals[i] >= 0) {
            while (k-- > 0)
                t->vals[slots[k]] = -1;
            return 0;
        }
        t->keys[i] = hashes[k];
        t->vals[i] = (int64_t)(first + k);
        t->order[t->used + k] = hashes[k];
        slots[k] = i;
    }
    t->used += count;
    return 1;
}

/* a key of the Python mapping: an int in [0, 2**64); 0 and an exception otherwise */
static int head_key(PyObject *key, uint64_t *h)
{
    if (!PyLong_Check(key)) {
        PyErr_Format(PyExc_TypeError, "Head keys are ints, not %.100s", Py_TYPE(key)->tp_name);
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(key);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *h = (uint64_t)v;
    return 1;
}

static PyObject *Head_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Head() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: empty, nothing allocated */
}

static void Head_dealloc(HeadObject *t)
{
    PyMem_Free(t->keys);
    PyMem_Free(t->vals);
    PyMem_Free(t->order);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t Head_len(HeadObject *t)
{
    return t->used;
}

/* the position of hash `key` held, or -1 (absent, or not such an int: no exception left) */
static int64_t head_lookup_obj(HeadObject *t, PyObject *key)
{
    uint64_t h;
    if (!head_key(key, &h)) {
        PyErr_Clear();
        return -1;
    }
    if (t->cap == 0)
        return -1;
    return t->vals[head_probe(t, h)];
}

static PyObject *Head_subscript(HeadObject *t, PyObject *key)
{
    int64_t pos = head_lookup_obj(t, key);
    if (pos < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return PyLong_FromLongLong(pos);
}

static int Head_ass_subscript(HeadObject *t, PyObject *key, PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "Head entries are not deleted");
        return -1;
    }
    uint64_t h;
    if (!head_key(key, &h))
        return -1;
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "Head values are ints, not %.100s", Py_TYPE(value)->tp_name);
        return -1;
    }
    long long pos = PyLong_AsLongLong(value);
    if (pos == -1 && PyErr_Occurred())
        return -1;
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "Head values are positions (>= 0)");
        return -1;
    }
    return head_store((PyObject *)t, h, (Py_ssize_t)pos);
}

static int Head_contains(HeadObject *t, PyObject *key)
{
    return head_lookup_obj(t, key) >= 0;
}

static PyObject *Head_get(HeadObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
        return NULL;
    }
    int64_t pos = head_lookup_obj(t, args[0]);
    if (pos >= 0)
        return PyLong_FromLongLong(pos);
    PyObject *dflt = nargs == 2 ? args[1] : Py_None;
    Py_INCREF(dflt);
    return dflt;
}

/* 0: keys, 1: values, 2: (key, value) pairs; a list in first-insertion order */
static PyObject *head_list(HeadObject *t, int what)
{
    PyObject *out = PyList_New(t->used);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t n = 0; n < t->used; n++) {
        uint64_t h = t->order[n];
        PyObject *key = what != 1 ? PyLong_FromUnsignedLongLong(h) : NULL;
        PyObject *value = what != 0 ? PyLong_FromLongLong(t->vals[head_probe(t, h)]) : NULL;
        PyObject *item = what == 0 ? key : what == 1 ? value : NULL;
        if (what == 2 && key != NULL && value != NULL)
            item = PyTuple_Pack(2, key, value);
        if (what == 2) {
            Py_XDECREF(key);
            Py_XDECREF(value);
        }
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, n, item);
    }
    return out;
}

static PyObject *Head_keys(HeadObject *t, PyObject *unused)
{
    return head_list(t, 0);
}

static PyObject *Head_values(HeadObject *t, PyObject *unused)
{
    return head_list(t, 1);
}

static PyObject *Head_items(HeadObject *t, PyObject *unused)
{
    return head_list(t, 2);
}

static PyObject *head_as_dict(HeadObject *t)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (Py_ssize_t n = 0; n < t->used; n++) {
        uint64_t h = t->order[n];
        PyObject *key = PyLong_FromUnsignedLongLong(h);
        PyObject *value = PyLong_FromLongLong(t->vals[head_probe(t, h)]);
        int rc = key == NULL || value == NULL ? -1 : PyDict_SetItem(d, key, value);
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *Head_to_dict(HeadObject *t, PyObject *unused)
{
    return head_as_dict(t);
}

static PyObject *Head_iter(HeadObject *t)
{
    PyObject *keys = head_list(t, 0);
    if (keys == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

/* == and != against a dict or another Head: as dicts with the same items (order aside, as dicts) */
static PyObject *Head_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !(PyDict_Check(b) || HEAD_CHECK(b)))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *x = head_as_dict((HeadObject *)a);
    PyObject *y = HEAD_CHECK(b) ? head_as_dict((HeadObject *)b) : (Py_INCREF(b), b);
    PyObject *result = x == NULL || y == NULL ? NULL : PyObject_RichCompare(x, y, op);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return result;
}

static PyObject *Head_repr(HeadObject *t)
{
    PyObject *d = head_as_dict(t);
    if (d == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("Head(%R)", d);
    Py_DECREF(d);
    return r;
}

static PyMappingMethods Head_mapping = {
    (lenfunc)Head_len,
    (binaryfunc)Head_subscript,
    (objobjargproc)Head_ass_subscript,
};

static PySequenceMethods Head_sequence = {
    .sq_contains = (objobjproc)Head_contains,
};

static PyMethodDef Head_methods[] = {
    {"get", (PyCFunction)(void (*)(void))Head_get, METH_FASTCALL, "head[key] if present, else default."},
    {"keys", (PyCFunction)Head_keys, METH_NOARGS, "The hashes (a list), in first-insertion order."},
    {"values", (PyCFunction)Head_values, METH_NOARGS, "The positions (a list), in the keys' order."},
    {"items", (PyCFunction)Head_items, METH_NOARGS, "(hash, position) pairs (a list), in the keys' order."},
    {"to_dict", (PyCFunction)Head_to_dict, METH_NOARGS, "The same items as a dict, in the same order."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HeadType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txmq.storage._batchenc.Head",
    .tp_basicsize = sizeof(HeadObject),
    .tp_dealloc = (destructor)Head_dealloc,
    .tp_repr = (reprfunc)Head_repr,
    .tp_as_sequence = &Head_sequence,
    .tp_as_mapping = &Head_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The key index's head: hash -> newest entry position, in a C table (see _batchenc.c).",
    .tp_richcompare = Head_richcompare,
    .tp_iter = (getiterfunc)Head_iter,
    .tp_methods = Head_methods,
    .tp_new = Head_new,
};

/* a head argument: an exact dict or a Head */
static inline int is_head(PyObject *head)
{
    return PyDict_CheckExact(head) || HEAD_CHECK(head);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* head_extend(head, digests, first) -> bool: the key index's head (dict: hash -> position) given
   hash(i) -> first + i for every 8-byte digest (the hash: the digest read big-endian, as
   index.key_hashes reads it) when no hash is in head yet and none repeats; False, head unchanged,
   otherwise (index.ActiveEntries.extend_new's rule) */
static PyObject *py_head_extend(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !is_head(args[0])) {
        PyErr_SetString(PyExc_TypeError, "head_extend(head: dict | Head, digests, first)");
        return NULL;
    }
    PyObject *head = args[0];
    Py_ssize_t first = PyLong_AsSsize_t(args[2]);
    if (first == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer digests;
    if (PyObject_GetBuffer(args[1], &digests, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    uint64_t *hashes = NULL;
    PyObject **keys = NULL;
    Py_ssize_t made = 0;
    if (digests.len % 8) {
        PyErr_SetString(PyExc_ValueError, "head_extend: digests are 8 bytes each");
        goto done;
    }
    Py_ssize_t count = digests.len / 8;
    const unsigned char *d = digests.buf;
    hashes = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(uint64_t));
    keys = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(PyObject *));
    if (hashes == NULL || keys == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t h = 0;
        for (int k = 0; k < 8; k++)
            h = h << 8 | d[8 * i + k];
        hashes[i] = h;
    }
    if (HEAD_CHECK(head)) { /* the table checks and takes them in one pass */
        int fresh = head_add_fresh((HeadObject *)head, hashes, count, first, (Py_ssize_t *)keys);
        result = fresh < 0 ? NULL : fresh ? Py_True : Py_False;
        goto done;
    }
    qsort(hashes, (size_t)count, sizeof(uint64_t), cmp_u64);
    for (Py_ssize_t i = 1; i < count; i++)
        if (hashes[i] == hashes[i - 1]) {
            result = Py_False;
            goto done;
        }
    for (Py_ssize_t i = 0; i < count; i++, made++) {
        uint64_t h = 0;
        for (int k = 0; k < 8; k++)
            h = h << 8 | d[8 * i + k];
        keys[i] = PyLong_FromUnsignedLongLong(h);
        if (keys[i] == NULL)
            goto done;
        int found = PyDict_Contains(head, keys[i]);
        if (found < 0) {
            made++;
            goto done;
        }
        if (found) {
            made++;
            result = Py_False;
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *position = PyLong_FromSsize_t(first + i);
        if (position == NULL || PyDict_SetItem(head, keys[i], position) < 0) {
            /* only on memory exhaustion: the entries set so far are taken back */
            PyObject *type, *value, *trace;
            Py_XDECREF(position);
            PyErr_Fetch(&type, &value, &trace);
            for (Py_ssize_t j = 0; j < i; j++)
                if (PyDict_DelItem(head, keys[j]) < 0)
                    PyErr_Clear();
            PyErr_Restore(type, value, trace);
            goto done;
        }
        Py_DECREF(position);
    }
    result = Py_True;
done:
    if (keys != NULL)
        for (Py_ssize_t i = 0; i < made; i++)
            Py_XDECREF(keys[i]);
    PyMem_Free(keys);
    PyMem_Free(hashes);
    PyBuffer_Release(&digests);
    Py_XINCREF(result);
    return result;
}

/* ------------------------------------------------------------------ index: one record's keys */

/* A few recent keys' digests, so a key indexed twice in a short while (a transaction's half and its
   committed message share their UNIQ_KEY) is hashed once: direct-mapped by the str's own hash, a hit
   only for an exact str equal to the one kept (the digest depends on nothing but the text). */
#define MEMO_SLOTS 256
#define MEMO_KEY_MAX 128 /* longer keys are not kept */
static struct {
    PyObject *key; /* a strong reference to an exact str, or NULL */
    unsigned char digest[8];
} memo[MEMO_SLOTS];

/* the key's blake2b-8 digest into out; 0, or -1 with an exception: a key that is not a str is the
   TypeError the compiled KeyIndex._add_keys_py raises for it (its loop variable is a str), a str
   that str.encode refuses its UnicodeEncodeError */
static int key_digest(PyObject *key, unsigned char out[8])
{
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "str object expected; got %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    int memoable = PyUnicode_CheckExact(key) && PyUnicode_GET_LENGTH(key) <= MEMO_KEY_MAX;
    Py_ssize_t slot = 0;
    if (memoable) {
        Py_hash_t h = PyObject_Hash(key); /* an exact str: cannot fail */
        slot = (Py_ssize_t)((size_t)h % MEMO_SLOTS);
        PyObject *kept = memo[slot].key;
        if (kept != NULL && (kept == key || (PyUnicode_GET_LENGTH(kept) == PyUnicode_GET_LENGTH(key) &&
                                             PyUnicode_KIND(kept) == PyUnicode_KIND(key) &&
                                             memcmp(PyUnicode_DATA(kept), PyUnicode_DATA(key),
                                                    (size_t)(PyUnicode_GET_LENGTH(key) * PyUnicode_KIND(key))) == 0))) {
            memcpy(out, memo[slot].digest, 8);
            return 0;
        }
    }
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key, &len); /* UnicodeEncodeError as str.encode */
    if (utf8 == NULL)
        return -1;
    blake2b_8((const unsigned char *)utf8, (size_t)len, out);
    if (memoable) {
        Py_INCREF(key);
        Py_XSETREF(memo[slot].key, key);
        memcpy(memo[slot].digest, out, 8);
    }
    return 0;
}

/* array('q', [0]) and a view of its item, held for good: a value is appended to an array('q') by
   writing it there and concatenating (arr += one, array's own memcpy extend), which is array.append
   of that value without its argument parsing (~0.6k instructions each, three per key). An array of
   another kind refuses the concatenation (TypeError), as it would refuse nothing silently. */
static PyObject *one_item;
static Py_buffer one_view;

static int append_i64(PyObject *array, int64_t value)
{
    long long item = (long long)value;
    memcpy(one_view.buf, &item, sizeof item);
    PyObject *done = PySequence_InPlaceConcat(array, one_item);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* index_add(head, offsets, stamps, previous, pending, keys, offset, store_ms) -> None: the key
   index's entries of one record's keys, as index.KeyIndex.add_py makes them key by key: the key's
   hash (key_hash), its newest entry from head (an entry of the same hash at or after offset: nothing
   for this key), head[hash] = len(offsets), offset, store_ms and the previous entry appended to the
   three arrays, the 24-byte entry (index_sealed.ENTRY) appended to pending (a bytearray) */
static PyObject *py_index_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !is_head(args[0]) || !PyByteArray_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "index_add(head: dict | Head, offsets, stamps, previous, pending: bytearray, keys, offset, store_ms)");
        return NULL;
    }
    PyObject *head = args[0], *offsets = args[1], *stamps = args[2], *previous = args[3], *pending = args[4];
    PyObject *offset_obj = args[6], *stamp_obj = args[7];
    PyObject *seq = PySequence_Fast(args[5], "index_add: keys must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    int64_t offset = 0, store_ms = 0;
    if (count && (get_int(offset_obj, 64, &offset) < 0 || get_int(stamp_obj, 64, &store_ms) < 0))
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned char digest[8];
        if (key_digest(PySequence_Fast_GET_ITEM(seq, i), digest) < 0)
            goto fail;
        uint64_t h = 0;
        for (int k = 0; k < 8; k++)
            h = h << 8 | digest[k];
        Py_ssize_t last = -1;
        int found = head_find(head, h, &last);
        if (found < 0)
            goto fail;
        if (!found)
            last = -1;
        if (last >= 0) {
            PyObject *at = PySequence_GetItem(offsets, last);
            if (at == NULL)
                goto fail;
            int newer = PyObject_RichCompareBool(at, offset_obj, Py_GE);
            Py_DECREF(at);
            if (newer < 0)
                goto fail;
            if (newer)
                continue; /* the same key twice in a record, or a replay */
        }
        Py_ssize_t size = PyObject_Length(offsets);
        if (size < 0 || head_store(head, h, size) < 0)
            goto fail;
        if (append_i64(offsets, offset) < 0 || append_i64(stamps, store_ms) < 0 ||
            append_i64(previous, (int64_t)last) < 0)
            goto fail;
        Py_ssize_t used = PyByteArray_GET_SIZE(pending);
        if (PyByteArray_Resize(pending, used + 24) < 0)
            goto fail;
        unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(pending) + used;
        memcpy(out, digest, 8);
        put_u64(out + 8, (uint64_t)offset);
        put_u64(out + 16, (uint64_t)store_ms);
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* An array('q') given the native int64 values of data through its own frombytes (one call, its
   memcpy), after checking it is an array('q'): any other kind would read the bytes otherwise. */
static PyObject *frombytes_name, *typecode_name;

static int is_q_array(PyObject *array)
{
    PyObject *code = PyObject_GetAttr(array, typecode_name);
    if (code == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyUnicode_Check(code) && PyUnicode_CompareWithASCIIString(code, "q") == 0;
    Py_DECREF(code);
    return ok;
}

static int extend_q(PyObject *array, const int64_t *values, Py_ssize_t count)
{
    PyObject *data = PyBytes_FromStringAndSize((const char *)values, count * (Py_ssize_t)sizeof(int64_t));
    if (data == NULL)
        return -1;
    PyObject *done = PyObject_CallMethodOneArg(array, frombytes_name, data);
    Py_DECREF(data);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* index_add_fresh(head, offsets, stamps, previous, pending, rows, record_offsets, store_ms) -> bool:
   a batch's key index entries in one call when every key is fresh: rows[i] (a tuple or list of str)
   are record i's keys at record_offsets[i]; when no key's hash is in head yet and none repeats, the
   entries index.KeyIndex.add_batch's columnar path makes (key_digests, ActiveEntries.extend_digests,
   pack_entries, in key order: head[hash] = position, the three arrays extended, the 24-byte entries
   appended to pending) and True. False, nothing changed and no error, for anything else (a row that
   is not a tuple or list, a key that is not a str or not UTF-8, a repeated or known hash, lengths
   that differ, arrays that are not array('q'), an offset outside int64): the caller then takes the
   general path, which gives its entries or its error. */
static PyObject *py_index_add_fresh(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !is_head(args[0]) || !PyByteArray_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "index_add_fresh(head: dict | Head, offsets, stamps, previous, "
                                         "pending: bytearray, rows, record_offsets, store_ms)");
        return NULL;
    }
    PyObject *head = args[0], *offsets = args[1], *stamps = args[2], *previous = args[3], *pending = args[4];
    int64_t store_ms;
    if (get_int(args[7], 64, &store_ms) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    if (!is_q_array(offsets) || !is_q_array(stamps) || !is_q_array(previous))
        Py_RETURN_FALSE;
    PyObject *rows = PySequence_Fast(args[5], "index_add_fresh: rows must be a sequence");
    if (rows == NULL)
        return NULL;
    PyObject *record_offsets = PySequence_Fast(args[6], "index_add_fresh: offsets must be a sequence");
    if (record_offsets == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    PyObject *result = Py_False;
    unsigned char *digests = NULL;
    uint64_t *sorted = NULL;
    int64_t *key_offsets = NULL, *fill = NULL;
    PyObject **hashes = NULL;
    const unsigned char **ptrs = NULL; /* the keys' UTF-8 (held by rows), hashed together */
    size_t *lens = NULL;
    Py_ssize_t made = 0, count = 0;
    Py_ssize_t records = PySequence_Fast_GET_SIZE(rows);
    if (PySequence_Fast_GET_SIZE(record_offsets) != records)
        goto done;
    for (Py_ssize_t r = 0; r < records; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, r);
        if (!PyTuple_Check(row) && !PyList_Check(row))
            goto done;
        count += PySequence_Fast_GET_SIZE(row);
    }
    if (count == 0) {
        result = Py_True;
        goto done;
    }
    digests = PyMem_Malloc((size_t)count * 8);
    sorted = PyMem_Malloc((size_t)count * sizeof(uint64_t));
    key_offsets = PyMem_Malloc((size_t)count * sizeof(int64_t));
    fill = PyMem_Malloc((size_t)count * sizeof(int64_t));
    hashes = PyMem_Calloc((size_t)count, sizeof(PyObject *));
    ptrs = PyMem_Malloc((size_t)count * sizeof *ptrs);
    lens = PyMem_Malloc((size_t)count * sizeof *lens);
    if (digests == NULL || sorted == NULL || key_offsets == NULL || fill == NULL || hashes == NULL || ptrs == NULL
        || lens == NULL) {
        PyErr_NoMemory();
        result = NULL;
        goto done;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t r = 0; r < records; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, r);
        Py_ssize_t n = PySequence_Fast_GET_SIZE(row);
        if (n == 0)
            continue;
        int64_t offset;
        if (get_int(PySequence_Fast_GET_ITEM(record_offsets, r), 64, &offset) < 0) {
            PyErr_Clear();
            goto done;
        }
        PyObject **keys = PySequence_Fast_ITEMS(row);
        for (Py_ssize_t j = 0; j < n; j++, k++) {
            PyObject *key = keys[j];
            if (!PyUnicode_Check(key))
                goto done;
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(key, &len);
            if (utf8 == NULL) {
                PyErr_Clear();
                goto done;
            }
            ptrs[k] = (const unsigned char *)utf8;
            lens[k] = (size_t)len;
            key_offsets[k] = offset;
        }
    }
    blake2b_8_many(ptrs, lens, count, digests);
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t h = 0;
        for (int b = 0; b < 8; b++)
            h = h << 8 | digests[8 * i + b];
        sorted[i] = h;
    }
    if (HEAD_CHECK(head)) { /* the table checks every hash and takes them all, or none, in one pass */
        Py_ssize_t at = PyObject_Length(offsets);
        if (at < 0) {
            result = NULL;
            goto done;
        }
        int fresh = head_add_fresh((HeadObject *)head, sorted, count, at, (Py_ssize_t *)fill);
        if (fresh <= 0) {
            result = fresh < 0 ? NULL : Py_False;
            goto done;
        }
        result = NULL; /* from here on only memory exhaustion fails, as below */
        goto arrays;
    }
    qsort(sorted, (size_t)count, sizeof(uint64_t), cmp_u64);
    for (Py_ssize_t i = 1; i < count; i++)
        if (sorted[i] == sorted[i - 1])
            goto done;
    for (Py_ssize_t i = 0; i < count; i++, made++) {
        uint64_t h = 0;
        for (int b = 0; b < 8; b++)
            h = h << 8 | digests[8 * i + b];
        hashes[i] = PyLong_FromUnsignedLongLong(h);
        if (hashes[i] == NULL) {
            made++;
            result = NULL;
            goto done;
        }
        int found = PyDict_Contains(head, hashes[i]);
        if (found != 0) {
            made++;
            result = found < 0 ? NULL : Py_False;
            goto done;
        }
    }
    Py_ssize_t first = PyObject_Length(offsets);
    if (first < 0) {
        result = NULL;
        goto done;
    }
    /* every check passed: from here on only memory exhaustion fails (then the entries set so far
       stay, as a failing head_extend or array extend leaves them on the reference path) */
    result = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *position = PyLong_FromSsize_t(first + i);
        if (position == NULL)
            goto done;
        int rc = PyDict_SetItem(head, hashes[i], position);
        Py_DECREF(position);
        if (rc < 0)
            goto done;
    }
arrays:
    if (extend_q(offsets, key_offsets, count) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++)
        fill[i] = store_ms;
    if (extend_q(stamps, fill, count) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++)
        fill[i] = -1;
    if (extend_q(previous, fill, count) < 0)
        goto done;
    Py_ssize_t used = PyByteArray_GET_SIZE(pending);
    if (PyByteArray_Resize(pending, used + 24 * count) < 0)
        goto done;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(pending) + used;
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(out + 24 * i, digests + 8 * i, 8);
        put_u64(out + 24 * i + 8, (uint64_t)key_offsets[i]);
        put_u64(out + 24 * i + 16, (uint64_t)store_ms);
    }
    result = Py_True;
done:
    if (hashes != NULL)
        for (Py_ssize_t i = 0; i < made; i++)
            Py_XDECREF(hashes[i]);
    PyMem_Free(hashes);
    PyMem_Free(lens);
    PyMem_Free(ptrs);
    PyMem_Free(fill);
    PyMem_Free(key_offsets);
    PyMem_Free(sorted);
    PyMem_Free(digests);
    Py_DECREF(record_offsets);
    Py_DECREF(rows);
    Py_XINCREF(result);
    return result;
}

/* index_add_rows(head, offsets, stamps, previous, pending, rows, record_offsets, record_stamps) -> bool:
   index_add of several records in one call (a dispatched group's single appends): rows[i] (a tuple or
   list of str) are record i's keys at record_offsets[i] (strictly ascending) stored at
   record_stamps[i]. The digests come from the memo or are hashed four at a time (blake2b_8_many), then
   every key goes as index_add takes it, in order: skipped when its hash's newest entry is at or after
   the record's offset, else head[hash] = position and the entry added; the three arrays are extended
   once each and the 24-byte entries appended to pending at once. False, nothing changed and no error,
   when anything is off (a row that is not a tuple or list, a key that is not a str or not UTF-8,
   lengths that differ, offsets not ascending, a value outside int64, arrays that are not array('q')):
   the caller then goes record by record (index_add, or the Python reference), which gives the
   entries or the error. */
static PyObject *py_index_add_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !is_head(args[0]) || !PyByteArray_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "index_add_rows(head: dict | Head, offsets, stamps, previous, "
                                         "pending: bytearray, rows, record_offsets, record_stamps)");
        return NULL;
    }
    PyObject *head = args[0], *offsets = args[1], *stamps = args[2], *previous = args[3], *pending = args[4];
    if (!is_q_array(offsets) || !is_q_array(stamps) || !is_q_array(previous))
        Py_RETURN_FALSE;
    if (!PyList_CheckExact(args[5]) || !PyList_CheckExact(args[6]) || !PyList_CheckExact(args[7]))
        Py_RETURN_FALSE;
    PyObject *rows = args[5], *record_offsets = args[6], *record_stamps = args[7];
    Py_ssize_t records = PyList_GET_SIZE(rows);
    if (PyList_GET_SIZE(record_offsets) != records || PyList_GET_SIZE(record_stamps) != records)
        Py_RETURN_FALSE;
    Py_ssize_t count = 0;
    for (Py_ssize_t r = 0; r < records; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyTuple_Check(row) && !PyList_Check(row))
            Py_RETURN_FALSE;
        count += PySequence_Fast_GET_SIZE(row);
    }
    PyObject *result = Py_False;
    int64_t *rec = PyMem_Malloc((size_t)(2 * records + 1) * sizeof(int64_t)); /* offsets, then stamps */
    size_t n_keys = (size_t)(count ? count : 1);
    unsigned char *digests = PyMem_Malloc(n_keys * 8);
    Py_ssize_t *key_record = PyMem_Malloc(n_keys * sizeof(Py_ssize_t));
    int *slots = PyMem_Malloc(n_keys * sizeof(int)); /* memo slot to fill, -1: none, -2: a memo hit */
    PyObject **key_objs = PyMem_Malloc(n_keys * sizeof(PyObject *));
    const unsigned char **ptrs = PyMem_Malloc(n_keys * sizeof *ptrs);
    size_t *lens = PyMem_Malloc(n_keys * sizeof *lens);
    unsigned char **outs = PyMem_Malloc(n_keys * sizeof *outs);
    int64_t *new_vals = PyMem_Malloc(n_keys * 3 * sizeof(int64_t)); /* offsets, stamps, previous */
    unsigned char *entries = PyMem_Malloc(n_keys * 24);
    unsigned char *miss_out = PyMem_Malloc(n_keys * 8);
    Py_buffer held = {0};
    int holding = 0;
    if (rec == NULL || digests == NULL || key_record == NULL || slots == NULL || key_objs == NULL || ptrs == NULL
        || lens == NULL || outs == NULL || new_vals == NULL || entries == NULL || miss_out == NULL) {
        PyErr_NoMemory();
        result = NULL;
        goto done;
    }
    for (Py_ssize_t r = 0; r < records; r++) {
        if (get_int(PyList_GET_ITEM(record_offsets, r), 64, &rec[r]) < 0
            || get_int(PyList_GET_ITEM(record_stamps, r), 64, &rec[records + r]) < 0) {
            PyErr_Clear();
            goto done;
        }
        if (r > 0 && rec[r] <= rec[r - 1])
            goto done;
    }
    /* every key's digest: the memo's, or hashed with the other misses four at a time */
    Py_ssize_t k = 0, misses = 0;
    for (Py_ssize_t r = 0; r < records; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        Py_ssize_t n = PySequence_Fast_GET_SIZE(row);
        PyObject **keys = PySequence_Fast_ITEMS(row);
        for (Py_ssize_t j = 0; j < n; j++, k++) {
            PyObject *key = keys[j];
            if (!PyUnicode_Check(key))
                goto done;
            key_record[k] = r;
            key_objs[k] = key;
            slots[k] = -1;
            if (PyUnicode_CheckExact(key) && PyUnicode_GET_LENGTH(key) <= MEMO_KEY_MAX) {
                Py_hash_t h = PyObject_Hash(key); /* an exact str: cannot fail */
                int slot = (int)((size_t)h % MEMO_SLOTS);
                PyObject *kept = memo[slot].key;
                if (kept != NULL && (kept == key || (PyUnicode_GET_LENGTH(kept) == PyUnicode_GET_LENGTH(key) &&
                                                     PyUnicode_KIND(kept) == PyUnicode_KIND(key) &&
                                                     memcmp(PyUnicode_DATA(kept), PyUnicode_DATA(key),
                                                            (size_t)(PyUnicode_GET_LENGTH(key) * PyUnicode_KIND(key))) == 0))) {
                    memcpy(digests + 8 * k, memo[slot].digest, 8);
                    slots[k] = -2;
                    continue;
                }
                slots[k] = slot;
            }
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(key, &len);
            if (utf8 == NULL) {
                PyErr_Clear();
                goto done;
            }
            ptrs[misses] = (const unsigned char *)utf8;
            lens[misses] = (size_t)len;
            outs[misses] = digests + 8 * k;
            misses++;
        }
    }
    if (misses) {
        blake2b_8_many(ptrs, lens, misses, miss_out);
        for (Py_ssize_t i = 0; i < misses; i++)
            memcpy(outs[i], miss_out + 8 * i, 8);
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (slots[i] >= 0) {
            Py_INCREF(key_objs[i]);
            Py_XSETREF(memo[slots[i]].key, key_objs[i]);
            memcpy(memo[slots[i]].digest, digests + 8 * i, 8);
        }
    /* every check passed: from here on only memory exhaustion (or a head that names a position past
       the arrays: IndexError, as the reference's offsets[previous]) fails */
    result = NULL;
    if (PyObject_GetBuffer(offsets, &held, PyBUF_SIMPLE) < 0)
        goto done;
    holding = 1;
    const int64_t *old_offsets = held.buf;
    Py_ssize_t base = held.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t added = 0;
    int64_t *new_offsets = new_vals, *new_stamps = new_vals + count, *new_previous = new_vals + 2 * count;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t offset = rec[key_record[i]], store_ms = rec[records + key_record[i]];
        uint64_t h = 0;
        for (int b = 0; b < 8; b++)
            h = h << 8 | digests[8 * i + b];
        Py_ssize_t last = -1;
        int found = head_find(head, h, &last);
        if (found < 0)
            goto done;
        if (!found)
            last = -1;
        if (last >= 0) {
            if (last >= base + added) {
                PyErr_SetString(PyExc_IndexError, "array index out of range");
                goto done;
            }
            int64_t at = last < base ? old_offsets[last] : new_offsets[last - base];
            if (at >= offset)
                continue; /* the same key twice in a record, or a replay */
        }
        if (head_store(head, h, base + added) < 0)
            goto done;
        new_offsets[added] = offset;
        new_stamps[added] = store_ms;
        new_previous[added] = (int64_t)last;
        unsigned char *out = entries + 24 * added;
        memcpy(out, digests + 8 * i, 8);
        put_u64(out + 8, (uint64_t)offset);
        put_u64(out + 16, (uint64_t)store_ms);
        added++;
    }
    PyBuffer_Release(&held);
    holding = 0;
    if (added) {
        if (extend_q(offsets, new_offsets, added) < 0 || extend_q(stamps, new_stamps, added) < 0
            || extend_q(previous, new_previous, added) < 0)
            goto done;
        Py_ssize_t used = PyByteArray_GET_SIZE(pending);
        if (PyByteArray_Resize(pending, used + 24 * added) < 0)
            goto done;
        memcpy(PyByteArray_AS_STRING(pending) + used, entries, (size_t)(24 * added));
    }
    result = Py_True;
done:
    if (holding)
        PyBuffer_Release(&held);
    PyMem_Free(miss_out);
    PyMem_Free(entries);
    PyMem_Free(new_vals);
    PyMem_Free(outs);
    PyMem_Free(lens);
    PyMem_Free(ptrs);
    PyMem_Free(key_objs);
    PyMem_Free(slots);
    PyMem_Free(key_record);
    PyMem_Free(digests);
    PyMem_Free(rec);
    Py_XINCREF(result);
    return result;
}

/* put_unit(pending, offset, size, tags_code) -> None: one ConsumeQueue unit (consume_queue.UNIT:
   offset i64, size i32, tags code i64, big-endian) appended to the bytearray pending, as
   pending += UNIT.pack(offset, size, tags_code); struct.error on a value out of range, pending
   unchanged, as struct.pack does */
static PyObject *py_put_unit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "put_unit(pending: bytearray, offset, size, tags_code)");
        return NULL;
    }
    int64_t offset, size, code;
    if (get_int(args[1], 64, &offset) < 0 || get_int(args[2], 32, &size) < 0 || get_int(args[3], 64, &code) < 0)
        return NULL;
    PyObject *pending = args[0];
    Py_ssize_t used = PyByteArray_GET_SIZE(pending);
    if (PyByteArray_Resize(pending, used + 20) < 0)
        return NULL;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(pending) + used;
    put_u64(out, (uint64_t)offset);
    put_u32(out + 8, (uint32_t)size);
    put_u64(out + 12, (uint64_t)code);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ a batch's column checks */

/* every item of a column (an exact tuple or list): its items and count, or 0 (anything else) */
static int col_items(PyObject *col, PyObject ***items, Py_ssize_t *n)
{
    if (PyTuple_CheckExact(col)) {
        *items = &PyTuple_GET_ITEM(col, 0);
        *n = PyTuple_GET_SIZE(col);
        return 1;
    }
    if (PyList_CheckExact(col)) {
        *items = ((PyListObject *)col)->ob_item;
        *n = PyList_GET_SIZE(col);
        return 1;
    }
    return 0;
}

/* every item an exact int in [low, high] (an item that is the item before it is not looked at again:
   the lane's columns repeat one object, (0,) * count) */
static int col_ints_within(PyObject *col, long long low, long long high)
{
    PyObject **items;
    Py_ssize_t n;
    if (!col_items(col, &items, &n))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (i > 0 && v == items[i - 1])
            continue;
        if (!PyLong_CheckExact(v))
            return 0;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if (x < low || x > high)
            return 0;
    }
    return 1;
}

/* every item exact bytes of at most `most` bytes (and, ascii: every byte below 0x80); an item that is
   the item before it is not looked at again */
static int col_bytes_within(PyObject *col, long long most, int ascii)
{
    PyObject **items;
    Py_ssize_t n;
    if (!col_items(col, &items, &n))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (i > 0 && v == items[i - 1])
            continue;
        if (!PyBytes_CheckExact(v) || (long long)PyBytes_GET_SIZE(v) > most)
            return 0;
        if (ascii) {
            const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(v);
            Py_ssize_t size = PyBytes_GET_SIZE(v), k = 0;
            uint64_t high = 0;
            for (; k + 8 <= size; k += 8) {
                uint64_t w;
                memcpy(&w, p + k, 8);
                high |= w;
            }
            for (; k < size; k++)
                high |= p[k];
            if (high & 0x8080808080808080ull)
                return 0;
        }
    }
    return 1;
}

/* columns_fit(topic, columns, queue_id_max, body_max, properties_max) -> bool: True when a batch's
   columns (codec.Columns: topics, queue ids, bodies, properties, tags codes, flags, sys flags, born
   ms, born hosts, reconsume times, prepared offsets, index keys) surely pass store._check_records'
   column checks: every topic exact bytes equal to topic, every queue id an int in [0, queue_id_max],
   bodies and properties exact bytes within their limits, the properties ASCII, born hosts exact bytes
   of at most 255, flags, sys flags and reconsume times in int32, tags codes, born ms and prepared
   offsets in int64. False for anything else (an odd type too): the Python checks then judge, so the
   answer only ever skips work that would have found nothing. */
static PyObject *py_columns_fit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "columns_fit(topic: bytes, columns, queue_id_max, body_max, properties_max)");
        return NULL;
    }
    long long lim[3];
    for (int i = 0; i < 3; i++) {
        lim[i] = PyLong_AsLongLong(args[2 + i]);
        if (lim[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    PyObject *columns = args[1], *topic = args[0];
    if (!PyTuple_CheckExact(columns) || PyTuple_GET_SIZE(columns) != 12)
        Py_RETURN_FALSE;
    PyObject **col = &PyTuple_GET_ITEM(columns, 0);
    PyObject **items;
    Py_ssize_t n;
    if (!col_items(col[0], &items, &n))
        Py_RETURN_FALSE;
    const char *name = PyBytes_AS_STRING(topic);
    Py_ssize_t name_len = PyBytes_GET_SIZE(topic);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (v != topic && (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) != name_len
                           || memcmp(PyBytes_AS_STRING(v), name, (size_t)name_len) != 0))
            Py_RETURN_FALSE;
    }
    const long long i32_lo = -(1LL << 31), i32_hi = (1LL << 31) - 1;
    int fit = col_ints_within(col[1], 0, lim[0]) && col_bytes_within(col[2], lim[1], 0)
              && col_bytes_within(col[3], lim[2], 1) && col_bytes_within(col[8], 255, 0)
              && col_ints_within(col[5], i32_lo, i32_hi) && col_ints_within(col[6], i32_lo, i32_hi)
              && col_ints_within(col[9], i32_lo, i32_hi) && col_ints_within(col[4], LLONG_MIN, LLONG_MAX)
              && col_ints_within(col[7], LLONG_MIN, LLONG_MAX) && col_ints_within(col[10], LLONG_MIN, LLONG_MAX);
    if (fit)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* record_sizes(fixed, properties, bodies) -> list[int] | None: fixed + len(properties[i]) +
   len(bodies[i]) for every record (codec.batch_sizes of a batch with one topic and born host: fixed
   is the record's size without its properties and body); None, for the Python loop to judge, unless
   both are exact tuples or lists of exact bytes of the same length */
static PyObject *py_record_sizes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_sizes(fixed, properties, bodies)");
        return NULL;
    }
    Py_ssize_t fixed = PyLong_AsSsize_t(args[0]);
    if (fixed == -1 && PyErr_Occurred())
        return NULL;
    PyObject **props, **bodies;
    Py_ssize_t n, m;
    if (!col_items(args[1], &props, &n) || !col_items(args[2], &bodies, &m) || n != m)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyBytes_CheckExact(props[i]) || !PyBytes_CheckExact(bodies[i]))
            Py_RETURN_NONE;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *size = PyLong_FromSsize_t(fixed + PyBytes_GET_SIZE(props[i]) + PyBytes_GET_SIZE(bodies[i]));
        if (size == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, size);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"encode_batch", (PyCFunction)(void (*)(void))py_encode_batch, METH_FASTCALL,
     "Encode a batch's records into buf (see the module's source)."},
    {"key_digests", py_key_digests, METH_O, "blake2b-8 digests of the keys (str), joined."},
    {"pack_entries", (PyCFunction)(void (*)(void))py_pack_entries, METH_FASTCALL,
     "The key index's 24-byte entries of (digest, offset, store_ms)."},
    {"offset_ids", (PyCFunction)(void (*)(void))py_offset_ids, METH_FASTCALL,
     "prefix + the 16 upper-case hex digits of every offset (u64)."},
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_FASTCALL, "CRC32C of data, continuing value."},
    {"crc32c_table", (PyCFunction)(void (*)(void))py_crc32c_table, METH_FASTCALL,
     "CRC32C by the portable table path."},
    {"hardware", py_hardware, METH_NOARGS, "Whether CRC32C runs on the CPU's SSE4.2 instruction."},
    {"encode_record", (PyCFunction)(void (*)(void))py_encode_record, METH_FASTCALL,
     "Encode one record (codec.encode_into) into buf; returns its size."},
    {"pack_units", (PyCFunction)(void (*)(void))py_pack_units, METH_FASTCALL,
     "The ConsumeQueue's 20-byte units of the records from start on."},
    {"head_extend", (PyCFunction)(void (*)(void))py_head_extend, METH_FASTCALL,
     "The key index's head extended by fresh, distinct hashes, or False (unchanged)."},
    {"index_add", (PyCFunction)(void (*)(void))py_index_add, METH_FASTCALL,
     "The key index's entries of one record's keys (index.KeyIndex.add_py's steps)."},
    {"index_add_fresh", (PyCFunction)(void (*)(void))py_index_add_fresh, METH_FASTCALL,
     "A batch's key index entries when every key is fresh (KeyIndex.add_batch's columnar path), or False."},
    {"index_add_rows", (PyCFunction)(void (*)(void))py_index_add_rows, METH_FASTCALL,
     "index_add of several records' keys in one call (KeyIndex.add_rows), or False (unchanged)."},
    {"columns_fit", (PyCFunction)(void (*)(void))py_columns_fit, METH_FASTCALL,
     "Whether a batch's columns surely pass store._check_records' column checks."},
    {"record_sizes", (PyCFunction)(void (*)(void))py_record_sizes, METH_FASTCALL,
     "fixed + len(properties[i]) + len(bodies[i]) of every record, or None."},
    {"put_unit", (PyCFunction)(void (*)(void))py_put_unit, METH_FASTCALL,
     "One ConsumeQueue unit appended to a bytearray (pending += UNIT.pack(...))."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.storage._batchenc", "The store's batched-append loops in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__batchenc(void)
{
    crc_init();
    PyObject *struct_module = PyImport_ImportModule("struct");
    if (struct_module == NULL)
        return NULL;
    struct_error = PyObject_GetAttrString(struct_module, "error");
    Py_DECREF(struct_module);
    if (struct_error == NULL)
        return NULL;
    if (frombytes_name == NULL) {
        frombytes_name = PyUnicode_InternFromString("frombytes");
        typecode_name = PyUnicode_InternFromString("typecode");
        if (frombytes_name == NULL || typecode_name == NULL)
            return NULL;
    }
    if (one_item == NULL) {
        PyObject *array_module = PyImport_ImportModule("array");
        if (array_module == NULL)
            return NULL;
        one_item = PyObject_CallMethod(array_module, "array", "s[i]", "q", 0);
        Py_DECREF(array_module);
        if (one_item == NULL)
            return NULL;
        if (PyObject_GetBuffer(one_item, &one_view, PyBUF_WRITABLE) < 0)
            return NULL;
        if (one_view.len != (Py_ssize_t)sizeof(long long)) {
            PyErr_SetString(PyExc_SystemError, "_batchenc: array('q') items are not 8 bytes");
            return NULL;
        }
    }
    if (PyType_Ready(&HeadType) < 0)
        return NULL;
    PyObject *made = PyModule_Create(&module);
    if (made == NULL)
        return NULL;
    Py_INCREF(&HeadType);
    if (PyModule_AddObject(made, "Head", (PyObject *)&HeadType) < 0) {
        Py_DECREF(&HeadType);
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
