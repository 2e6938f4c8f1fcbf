/* txmq.protocol.grpc._sendscan: a plain SendMessageRequest read straight into the send lane's columns,
 * in one C call.
 *
 *   send_scan(data, tail, body_bytes_max, tag_bytes_max, keys_count_max, key_bytes_max,
 *             property_count_max, properties_bytes_max)
 *       -> (topic, born_host, (bodies, properties, tags_codes, index_keys, message_ids, body_total)) | None
 *
 * data is a serialized apache.rocketmq.v2.SendMessageRequest (repeated Message messages = 1). The third
 * item is a LaneScan (broker/send.py), what server/remoting/_lanescan.c gives for a SEND_BATCH_MESSAGE:
 * per message its body, the record's properties as the send lane lays them out for a NORMAL message
 * without user properties (TAGS, KEYS (the keys joined by one space), UNIQ_KEY, then `tail`: what the
 * lane sets after the id, built by the broker), the tag's code (Java String.hashCode), the index keys
 * (keys..., message id) and the message id; body_total is the sum of the bodies' lengths. topic is the
 * messages' topic name, born_host the first message's born host ("" when absent).
 *
 * None for anything unusual, so the Python path (wire.send_lane, checks.check_lean, SendService's
 * _lane_batch or lane_append), which stays the reference, judges the request and gives its errors.
 * Taken are only requests whose every message has: one topic (a Resource with a name and at most a
 * namespace, byte for byte the first message's), one system_properties, one non-empty body within
 * body_bytes_max, no user property, a message id of printable ASCII without a space, a tag (or none)
 * of printable ASCII without '|' nor a leading or trailing space within tag_bytes_max, keys of
 * printable ASCII without a space (at most keys_count_max, each within key_bytes_max), encoding
 * unspecified or IDENTITY, type unspecified or NORMAL, no message group; besides those only a born
 * host and a trace context (ASCII text), a born time and a body digest (each once, read as protobuf
 * reads them). Any other field, a repeated singular field, a malformed varint or length, a byte
 * outside ASCII in a text, and a record over property_count_max or properties_bytes_max: None.
 * Every varint is read as wire.py reads it (at most nine bytes).
 *
 * Written for txmq; no code copied from elsewhere.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KEYS_MAX 64 /* keys remembered per message; more: declined (limits.keys_count_max is 64) */
#define ENCODING_GZIP 2
#define TYPE_NORMAL 1

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} span;

/* the varint at *pos (before end), at most nine bytes as wire._read_varint; 0: read, 1: declined */
static inline int read_varint(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end, uint64_t *value)
{
    Py_ssize_t at = *pos;
    uint64_t v = 0;
    for (int shift = 0; shift < 63; shift += 7) {
        if (at >= end)
            return 1;
        unsigned char byte = d[at++];
        v |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *pos = at;
            *value = v;
            return 0;
        }
    }
    return 1;
}

/* a length-delimited payload at *pos: its span, *pos after it */
static inline int read_len(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end, span *out)
{
    uint64_t size;
    if (read_varint(d, pos, end, &size) || size > (uint64_t)(end - *pos))
        return 1;
    out->p = d + *pos;
    out->n = (Py_ssize_t)size;
    *pos += (Py_ssize_t)size;
    return 0;
}

static inline int ascii(span s)
{
    for (Py_ssize_t i = 0; i < s.n; i++)
        if (s.p[i] >= 0x80)
            return 0;
    return 1;
}

/* printable ASCII (0x20..0x7E); space allowed when `space` */
static inline int printable(span s, int space)
{
    for (Py_ssize_t i = 0; i < s.n; i++) {
        unsigned char c = s.p[i];
        if (c < 0x20 || c > 0x7E || (c == ' ' && !space))
            return 0;
    }
    return 1;
}

/* a Timestamp (varints 1, 2; texts 0) or a Digest (varint 1, ASCII text 2; texts 1): wire._check_plain */
static int check_plain(span s, int texts)
{
    const unsigned char *d = s.p;
    Py_ssize_t pos = 0, end = s.n;
    while (pos < end) {
        uint64_t key, ignored;
        if (read_varint(d, &pos, end, &key))
            return 1;
        if (key == 0x08 || (key == 0x10 && !texts)) {
            if (read_varint(d, &pos, end, &ignored))
                return 1;
        } else if (key == 0x12 && texts) {
            span text;
            if (read_len(d, &pos, end, &text) || !ascii(text))
                return 1;
        } else {
            return 1;
        }
    }
    return 0;
}

/* a Resource: name (2) and at most a namespace (1), each once and ASCII */
static int read_resource(span s, span *name)
{
    const unsigned char *d = s.p;
    Py_ssize_t pos = 0, end = s.n;
    int have_name = 0, have_namespace = 0;
    name->p = s.p, name->n = 0;
    while (pos < end) {
        uint64_t key;
        span text;
        if (read_varint(d, &pos, end, &key) || read_len(d, &pos, end, &text) || !ascii(text))
            return 1;
        if (key == 0x12 && !have_name) {
            have_name = 1;
            *name = text;
        } else if (key == 0x0A && !have_namespace) {
            have_namespace = 1;
        } else {
            return 1;
        }
    }
    return 0;
}

typedef struct {
    span topic_raw, body, tag, id, host;
    span keys[KEYS_MAX];
    int nkeys;
    int have_host;
} message;

/* one Message's fields the lane takes; 0: read, 1: declined */
static int read_message(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end, message *m)
{
    int have_topic = 0, have_sysp = 0, have_body = 0, have_tag = 0, have_id = 0;
    m->nkeys = 0;
    m->have_host = 0;
    m->tag.n = 0;
    m->body.n = 0;
    m->id.n = 0;
    m->host.n = 0;
    while (pos < end) {
        uint64_t key;
        span field;
        if (read_varint(d, &pos, end, &key))
            return 1;
        if (key == 0x22 && !have_body) { /* body (4) */
            if (read_len(d, &pos, end, &m->body))
                return 1;
            have_body = 1;
        } else if (key == 0x0A && !have_topic) { /* topic (1) */
            if (read_len(d, &pos, end, &m->topic_raw))
                return 1;
            have_topic = 1;
        } else if (key == 0x1A && !have_sysp) { /* system_properties (3) */
            if (read_len(d, &pos, end, &field))
                return 1;
            have_sysp = 1;
            const unsigned char *s = field.p;
            Py_ssize_t at = 0, stop = field.n;
            int have_encoding = 0, have_type = 0, have_born = 0, have_digest = 0;
            while (at < stop) {
                uint64_t inner;
                span text;
                if (read_varint(s, &at, stop, &inner))
                    return 1;
                switch (inner) {
                case 0x0A: /* tag (1) */
                    if (have_tag || read_len(s, &at, stop, &m->tag))
                        return 1;
                    have_tag = 1;
                    break;
                case 0x12: /* keys (2) */
                    if (m->nkeys == KEYS_MAX || read_len(s, &at, stop, &m->keys[m->nkeys]))
                        return 1;
                    m->nkeys++;
                    break;
                case 0x1A: /* message_id (3) */
                    if (have_id || read_len(s, &at, stop, &m->id))
                        return 1;
                    have_id = 1;
                    break;
                case 0x28: /* body_encoding (5): one byte, as wire._read_enum */
                case 0x30: /* message_type (6) */
                    if (at >= stop || s[at] >= 0x80)
                        return 1;
                    {
                        unsigned char value = s[at++];
                        if (inner == 0x28) {
                            if (have_encoding || value == ENCODING_GZIP || value > 1)
                                return 1;
                            have_encoding = 1;
                        } else {
                            if (have_type || value > TYPE_NORMAL)
                                return 1;
                            have_type = 1;
                        }
                    }
                    break;
                case 0x42: /* born_host (8) */
                    if (m->have_host || read_len(s, &at, stop, &m->host) || !ascii(m->host))
                        return 1;
                    m->have_host = 1;
                    break;
                case 0x3A: /* born_timestamp (7) */
                    if (have_born || read_len(s, &at, stop, &text) || check_plain(text, 0))
                        return 1;
                    have_born = 1;
                    break;
                case 0x22: /* body_digest (4) */
                    if (have_digest || read_len(s, &at, stop, &text) || check_plain(text, 1))
                        return 1;
                    have_digest = 1;
                    break;
                case 0x92: /* trace_context (18) */
                    if (read_len(s, &at, stop, &text) || !ascii(text))
                        return 1;
                    break;
                default: /* a message group, delivery time, a reply-only or unknown field */
                    return 1;
                }
            }
        } else { /* user properties, a repeated field, an unknown one */
            return 1;
        }
    }
    return !have_topic || !have_sysp || !have_body;
}

static PyObject *ascii_str(const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

static PyObject *py_send_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "send_scan takes 8 arguments");
        return NULL;
    }
    long long lim[6];
    for (int i = 0; i < 6; i++) {
        lim[i] = PyLong_AsLongLong(args[2 + i]);
        if (lim[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    const long long body_max = lim[0], tag_max = lim[1], keys_count_max = lim[2], key_max = lim[3],
                    count_max = lim[4], props_max = lim[5];
    Py_buffer data, tail;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &tail, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    const unsigned char *d = data.buf;
    const Py_ssize_t size = data.len;
    const unsigned char *t = tail.buf;
    Py_ssize_t tail_pairs = 0;
    for (Py_ssize_t i = 0; i < tail.len; i++)
        tail_pairs += t[i] == 0x02;

    /* the messages counted first (each top-level field a message: anything else is declined below
       anyway), so the columns are made at their size and filled in place: four tuples and the ids'
       list, no appends and no list-to-tuple copies */
    Py_ssize_t total = 0;
    for (Py_ssize_t at = 0; at < size; total++) {
        uint64_t key;
        span whole;
        if (read_varint(d, &at, size, &key) || key != 0x0A || read_len(d, &at, size, &whole)) {
            PyBuffer_Release(&data);
            PyBuffer_Release(&tail);
            Py_RETURN_NONE;
        }
        at = whole.p - d + whole.n;
    }
    PyObject *bodies = PyTuple_New(total), *properties = PyTuple_New(total), *codes = PyTuple_New(total),
             *index_keys = PyTuple_New(total), *ids = PyList_New(total);
    PyObject *result = NULL, *topic = NULL, *born_host = NULL;
    message *m = PyMem_Malloc(sizeof(message));
    unsigned char *out = NULL;
    Py_ssize_t out_cap = 0;
    long long body_total = 0;
    span first_topic = {NULL, 0}, first_host = {NULL, 0};
    /* the last tag's code: a request's messages mostly share one tag */
    span coded_tag = {NULL, 0};
    PyObject *coded = NULL;
    if (!bodies || !properties || !codes || !index_keys || !ids || !m)
        goto error;

    Py_ssize_t pos = 0;
    int count = 0;
    if (size == 0)
        goto declined;
    while (pos < size) {
        uint64_t key;
        span whole;
        if (read_varint(d, &pos, size, &key) || key != 0x0A || read_len(d, &pos, size, &whole))
            goto declined;
        if (read_message(d, whole.p - d, whole.p - d + whole.n, m))
            goto declined;
        if (count == 0) {
            span name;
            if (read_resource(m->topic_raw, &name))
                goto declined;
            first_topic = m->topic_raw;
            first_host = m->host;
            topic = ascii_str(name.p, name.n);
            born_host = ascii_str(first_host.p, first_host.n);
            if (topic == NULL || born_host == NULL)
                goto error;
        } else if (m->topic_raw.n != first_topic.n || memcmp(m->topic_raw.p, first_topic.p, (size_t)first_topic.n)) {
            goto declined;
        }
        if (++count > total) /* not reached: the walk above read the same fields */
            goto declined;
        /* body, id, tag, keys: the checks check_lean and the lane make, taken only when they pass */
        if (m->body.n == 0 || m->body.n > body_max)
            goto declined;
        if (m->id.n == 0 || !printable(m->id, 0))
            goto declined;
        span g = m->tag;
        if (g.n > 0) {
            if (g.n > tag_max || !printable(g, 1) || g.p[0] == ' ' || g.p[g.n - 1] == ' '
                || memchr(g.p, '|', (size_t)g.n) != NULL)
                goto declined;
        }
        if (m->nkeys > keys_count_max)
            goto declined;
        Py_ssize_t keys_len = 0; /* joined by one space */
        for (int k = 0; k < m->nkeys; k++) {
            span key_span = m->keys[k];
            if (key_span.n == 0 || key_span.n > key_max || !printable(key_span, 0))
                goto declined;
            keys_len += (k ? 1 : 0) + key_span.n;
        }
        /* the record's properties: TAGS, KEYS, UNIQ_KEY, tail */
        Py_ssize_t need = 0;
        if (g.n)
            need += 4 + 2 + g.n;
        if (m->nkeys)
            need += 4 + 2 + keys_len;
        need += 8 + 2 + m->id.n + tail.len;
        long long pairs = (g.n > 0) + (m->nkeys > 0) + 1 + tail_pairs;
        if (pairs > count_max || need > props_max)
            goto declined;
        if (need > out_cap) {
            PyMem_Free(out);
            out_cap = need > 1024 ? need : 1024;
            out = PyMem_Malloc((size_t)out_cap);
            if (out == NULL) {
                PyErr_NoMemory();
                goto error;
            }
        }
        unsigned char *w = out;
#define PUT(src, len) (memcpy(w, (src), (size_t)(len)), w += (len))
        if (g.n) {
            PUT("TAGS\x01", 5);
            PUT(g.p, g.n);
            *w++ = 0x02;
        }
        if (m->nkeys) {
            PUT("KEYS\x01", 5);
            for (int k = 0; k < m->nkeys; k++) {
                if (k)
                    *w++ = ' ';
                PUT(m->keys[k].p, m->keys[k].n);
            }
            *w++ = 0x02;
        }
        PUT("UNIQ_KEY\x01", 9);
        PUT(m->id.p, m->id.n);
        *w++ = 0x02;
        PUT(t, tail.len);
#undef PUT
        /* the tag's code, computed again only when the tag changes */
        if (coded == NULL || coded_tag.n != g.n || (g.n && memcmp(coded_tag.p, g.p, (size_t)g.n) != 0)) {
            uint32_t h = 0;
            for (Py_ssize_t i = 0; i < g.n; i++)
                h = 31u * h + g.p[i];
            Py_XDECREF(coded);
            coded = PyLong_FromLong((long)(int32_t)h);
            if (coded == NULL)
                goto error;
            coded_tag = g;
        }
        PyObject *body = PyBytes_FromStringAndSize((const char *)m->body.p, m->body.n);
        PyObject *encoded = PyBytes_FromStringAndSize((const char *)out, w - out);
        PyObject *id = ascii_str(m->id.p, m->id.n);
        PyObject *keys_tuple = PyTuple_New(m->nkeys + 1);
        int bad = !body || !encoded || !id || !keys_tuple;
        if (!bad) {
            for (int k = 0; k < m->nkeys; k++) {
                PyObject *key_str = ascii_str(m->keys[k].p, m->keys[k].n);
                if (key_str == NULL) {
                    bad = 1;
                    break;
                }
                PyTuple_SET_ITEM(keys_tuple, k, key_str);
            }
        }
        if (bad) {
            Py_XDECREF(body);
            Py_XDECREF(encoded);
            Py_XDECREF(id);
            Py_XDECREF(keys_tuple);
            goto error;
        }
        /* the slots take the references (count <= total, checked above) */
        Py_INCREF(id);
        PyTuple_SET_ITEM(keys_tuple, m->nkeys, id);
        Py_INCREF(coded);
        PyTuple_SET_ITEM(bodies, count - 1, body);
        PyTuple_SET_ITEM(properties, count - 1, encoded);
        PyTuple_SET_ITEM(codes, count - 1, coded);
        PyTuple_SET_ITEM(index_keys, count - 1, keys_tuple);
        PyList_SET_ITEM(ids, count - 1, id);
        body_total += (long long)m->body.n;
        pos = whole.p - d + whole.n;
    }
    {
        PyObject *n = PyLong_FromLongLong(body_total);
        PyObject *scan = NULL;
        if (n)
            scan = PyTuple_Pack(6, bodies, properties, codes, index_keys, ids, n);
        if (scan != NULL)
            result = PyTuple_Pack(3, topic, born_host, scan);
        Py_XDECREF(scan);
        Py_XDECREF(n);
    }
    goto done;
declined:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    PyMem_Free(m);
    PyMem_Free(out);
    Py_XDECREF(coded);
    Py_XDECREF(topic);
    Py_XDECREF(born_host);
    Py_XDECREF(bodies);
    Py_XDECREF(properties);
    Py_XDECREF(codes);
    Py_XDECREF(index_keys);
    Py_XDECREF(ids);
    PyBuffer_Release(&data);
    PyBuffer_Release(&tail);
    return result;
}

/* protobuf varint of v into w; the bytes written */
static inline Py_ssize_t put_varint(unsigned char *w, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        w[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    w[n++] = (unsigned char)v;
    return n;
}

static inline Py_ssize_t varint_size(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* lane_reply(ok, message_ids, queue_offsets) -> bytes | None: wire.lane_reply's bytes (ok: the OK
 * status field, wire._OK_STATUS), or None when an id is not an ASCII str, an offset not an int in
 * 0..2**63-1, the columns' lengths differ or their types are others (the Python reference then
 * writes the reply or raises) */
static PyObject *py_lane_reply(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "lane_reply takes (bytes, ids, offsets)");
        return NULL;
    }
    /* ids: a list or tuple; offsets: a list, tuple or range (the commit log's offsets of a batch in
     * one queue), read as a list; anything else: the reference's */
    if (!(PyList_CheckExact(args[1]) || PyTuple_CheckExact(args[1]))
        || !(PyList_CheckExact(args[2]) || PyTuple_CheckExact(args[2]) || PyRange_Check(args[2])))
        Py_RETURN_NONE;
    PyObject *offsets_seq = PySequence_Fast(args[2], "offsets");
    if (offsets_seq == NULL)
        return NULL;
    PyObject *const *ids = PySequence_Fast_ITEMS(args[1]);
    PyObject *const *offsets = PySequence_Fast_ITEMS(offsets_seq);
    const unsigned char *ok = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const Py_ssize_t ok_n = PyBytes_GET_SIZE(args[0]), count = PySequence_Fast_GET_SIZE(args[1]);
    PyObject *out = NULL;
    if (PySequence_Fast_GET_SIZE(offsets_seq) != count)
        goto declined;
    Py_ssize_t total = ok_n;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *id = ids[i], *offset = offsets[i];
        if (!PyUnicode_CheckExact(id) || !PyUnicode_IS_ASCII(id) || !PyLong_CheckExact(offset))
            goto declined;
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(offset, &overflow);
        if (overflow || value < 0)
            goto declined;
        Py_ssize_t id_n = PyUnicode_GET_LENGTH(id);
        Py_ssize_t entry = ok_n + (id_n ? 1 + varint_size((uint64_t)id_n) + id_n : 0)
                           + (value ? 1 + varint_size((uint64_t)value) : 0);
        total += 1 + varint_size((uint64_t)entry) + entry;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(w, ok, (size_t)ok_n);
    w += ok_n;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *id = ids[i];
        uint64_t value = (uint64_t)PyLong_AsLongLong(offsets[i]);
        Py_ssize_t id_n = PyUnicode_GET_LENGTH(id);
        Py_ssize_t entry = ok_n + (id_n ? 1 + varint_size((uint64_t)id_n) + id_n : 0)
                           + (value ? 1 + varint_size(value) : 0);
        *w++ = 0x12;
        w += put_varint(w, (uint64_t)entry);
        memcpy(w, ok, (size_t)ok_n);
        w += ok_n;
        if (id_n) {
            *w++ = 0x12;
            w += put_varint(w, (uint64_t)id_n);
            memcpy(w, PyUnicode_1BYTE_DATA(id), (size_t)id_n);
            w += id_n;
        }
        if (value) {
            *w++ = 0x20;
            w += put_varint(w, value);
        }
    }
    goto done;
declined:
    out = Py_None;
    Py_INCREF(out);
done:
    Py_DECREF(offsets_seq);
    return out;
}

static PyMethodDef methods[] = {
    {"lane_reply", (PyCFunction)(void (*)(void))py_lane_reply, METH_FASTCALL,
     "wire.lane_reply's bytes for lists of ASCII ids and offsets, or None (see the source)."},
    {"send_scan", (PyCFunction)(void (*)(void))py_send_scan, METH_FASTCALL,
     "A plain SendMessageRequest as (topic, born host, the send lane's columns), or None (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.protocol.grpc._sendscan",
    "A SendMessageRequest into the send lane's columns, in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sendscan(void)
{
    return PyModule_Create(&module);
}
