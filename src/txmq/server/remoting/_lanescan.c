/* txmq.server.remoting._lanescan: a plain SEND_BATCH_MESSAGE body read straight into the send lane's
 * columns, in one C call.
 *
 *   lane_scan(data, tail, body_bytes_max, tag_bytes_max, keys_count_max, key_bytes_max,
 *             property_count_max, properties_bytes_max)
 *       -> (bodies, properties, tags_codes, index_keys, message_ids, body_total) | None
 *
 * data is the batch body (RocketMQ's batch encoding: per entry int32 TOTALSIZE, MAGIC, BODYCRC, FLAG,
 * body length, the body, u16 properties length, the properties as name\x01value\x02 pairs). For every
 * entry it gives the body (bytes), the record's properties as the send lane lays them out for a
 * NORMAL message (the user's pairs in their order, then TAGS, KEYS (the keys joined by one space),
 * UNIQ_KEY, then `tail`: what the lane sets after the id, built by the broker), the tag's code (Java
 * String.hashCode), the index keys (keys..., message id) and the message id. body_total is the sum
 * of the bodies' lengths.
 *
 * None for anything unusual, so the Python path (convert.lean_batch, SendService._lane_batch), which
 * stays the reference, judges the batch and gives its errors: a malformed entry or pair, a byte
 * outside ASCII in the properties, a \x01 in a value, no (or an empty) UNIQ_KEY, a message group
 * (__SHARDINGKEY: FIFO), a property that makes the message delayed or transactional, the ali-ons
 * sharding key, a user property named twice or with no name, an empty or padded tag or one holding
 * "||", and any limit exceeded (body size, tag, keys, property count, properties bytes). The caller
 * checks the batch's count and total.
 *
 *   one_scan(body, properties, tail, body_bytes_max, ...as above)
 *       -> the same columns, of one message | None
 *
 * One SEND_MESSAGE(_V2) message (pipelined single sends): its body (bytes, kept as the record's body,
 * not copied) and its header's properties (a str) read as an entry above, declined for the same
 * reasons and for a body that is not bytes or properties that are not ASCII. Its reference is
 * producer._messages (props.decode, convert.to_lean) and SendService.lane_append.
 *
 *   one_scan(..., keyless=True): a message without (or with an empty) UNIQ_KEY is also taken, its id
 *       being the lane's to make: its properties stop after "UNIQ_KEY\x01" (counted with the 34
 *       characters of the id to come against the limits), its index keys lack the id, and its ids
 *       list is empty. SendService.lane_one completes it after its clock reading, by
 *
 *   keyless_fill(head, keys, tail, prefix, sequence) -> (properties, index_keys, message_id)
 *
 *       the id msgid.new_message_id would make (prefix + "%08X" % sequence), the properties
 *       head + id + \x02 + tail, the index keys keys + (id,) (see the function).
 *
 * The names the lane reads, declines or drops are txmq.common.properties' (a test holds the lists
 * below to it, through lane_names()). Written for txmq; no code copied from elsewhere.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ENTRY_HEAD 20
#define USER_MAX 64 /* user pairs remembered per entry for the duplicate check; more: declined */

/* system properties the lane takes a value from */
static const char *const TAKEN[] = {"TAGS", "KEYS", "UNIQ_KEY"};
enum { P_TAGS, P_KEYS, P_UNIQ, P_OTHER_SYSTEM, P_DECLINE, P_USER };
/* declined: a message group (FIFO), delayed or transactional, check immunity, the ali-ons key */
static const char *const DECLINED[] = {
    "__SHARDINGKEY", "DELAY", "TRAN_MSG", "TIMER_DELIVER_MS", "CHECK_IMMUNITY_TIME_IN_SECONDS", "__SHARDING_KEY",
};
/* the other system properties: the lane sets them or drops them */
static const char *const DROPPED[] = {
    "PGROUP", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC", "RECONSUME_TIME", "MAX_RECONSUME_TIMES",
    "ORIGIN_MESSAGE_ID", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__transactionId__", "TRANSACTION_CHECK_TIMES",
    "MIN_OFFSET", "MAX_OFFSET", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "WAIT", "__TXMQ_TYPE",
    "__TXMQ_BORN_HOST", "__TXMQ_ATTEMPT",
};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int same(const unsigned char *p, Py_ssize_t n, const char *name)
{
    size_t len = strlen(name);
    return (size_t)n == len && memcmp(p, name, len) == 0;
}

static int kind_of(const unsigned char *p, Py_ssize_t n)
{
    for (int i = 0; i < COUNT(TAKEN); i++)
        if (same(p, n, TAKEN[i]))
            return i;
    for (int i = 0; i < COUNT(DECLINED); i++)
        if (same(p, n, DECLINED[i]))
            return P_DECLINE;
    for (int i = 0; i < COUNT(DROPPED); i++)
        if (same(p, n, DROPPED[i]))
            return P_OTHER_SYSTEM;
    return P_USER;
}

static inline uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* what Python's str.isspace holds for an ASCII character */
static inline int ascii_space(unsigned char c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
}

static PyObject *ascii_str(const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} span;

/* one entry's pieces, read from its properties; 0: read, 1: declined */
typedef struct {
    span tags, keys, uniq;
    span user_name[USER_MAX], user_value[USER_MAX];
    int users;
    int have_tags, have_keys, have_uniq;
} entry_props;

static int read_props(const unsigned char *p, Py_ssize_t n, entry_props *e)
{
    e->users = 0;
    e->have_tags = e->have_keys = e->have_uniq = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] >= 0x80)
            return 1; /* not ASCII: the Python decode judges the UTF-8 */
    Py_ssize_t at = 0;
    while (at < n) {
        const unsigned char *item = p + at;
        const unsigned char *stop = memchr(item, 0x02, (size_t)(n - at));
        Py_ssize_t len = stop ? stop - item : n - at;
        at += len + 1;
        if (len == 0)
            continue; /* an empty item between separators: skipped, as the split does */
        const unsigned char *sep = memchr(item, 0x01, (size_t)len);
        if (sep == NULL)
            return 1; /* a bare name */
        Py_ssize_t name_len = sep - item;
        const unsigned char *value = sep + 1;
        Py_ssize_t value_len = len - name_len - 1;
        if (memchr(value, 0x01, (size_t)value_len) != NULL)
            return 1; /* a separator in a value */
        int kind = kind_of(item, name_len);
        switch (kind) {
        case P_TAGS:
            e->tags.p = value, e->tags.n = value_len, e->have_tags = 1;
            break;
        case P_KEYS:
            e->keys.p = value, e->keys.n = value_len, e->have_keys = 1;
            break;
        case P_UNIQ:
            e->uniq.p = value, e->uniq.n = value_len, e->have_uniq = 1;
            break;
        case P_OTHER_SYSTEM:
            break;
        case P_DECLINE:
            return 1;
        default:
            if (name_len == 0 || e->users == USER_MAX)
                return 1;
            for (int u = 0; u < e->users; u++)
                if (e->user_name[u].n == name_len && memcmp(e->user_name[u].p, item, (size_t)name_len) == 0)
                    return 1; /* named twice: the dict keeps the first place and the last value */
            e->user_name[e->users].p = item, e->user_name[e->users].n = name_len;
            e->user_value[e->users].p = value, e->user_value[e->users].n = value_len;
            e->users++;
        }
    }
    return 0;
}

/* the lists an entry's pieces go to, and the scratch buffer its properties are laid out in */
typedef struct {
    PyObject *bodies, *properties, *codes, *index_keys, *ids; /* NULL for one message: got[] instead */
    PyObject *got[5]; /* one message's body, properties, tags code, index keys, id (new references) */
    entry_props *e;
    int e_heap;       /* e was allocated here */
    unsigned char *out;
    Py_ssize_t out_cap;
    int out_heap;     /* out was allocated here (else the caller's) */
    const unsigned char *tail;
    Py_ssize_t tail_len, tail_pairs;
    long long body_max, tag_max, keys_count_max, key_max, count_max, props_max;
    int keyless_ok; /* one_scan's keyless mode: no (or an empty) UNIQ_KEY is the lane's to make */
} scan_state;

#define KEYLESS_ID_LEN 34 /* msgid.new_message_id: the 26 characters of id_prefix, 8 hex digits */

/* One entry (its body at d, body_len bytes, or body_obj when not NULL: that object, bytes, is the
 * record's body; its properties at pp, pn bytes) appended to the lists. 0: appended, 1: declined,
 * -1: an error is set. */
static int scan_entry(scan_state *s, const unsigned char *d, Py_ssize_t body_len, PyObject *body_obj,
                      const unsigned char *pp, Py_ssize_t pn)
{
    entry_props *e = s->e;
    if (body_len == 0 || (long long)body_len > s->body_max)
        return 1;
    if (read_props(pp, pn, e))
        return 1;
    int keyless = !e->have_uniq || e->uniq.n == 0;
    if (keyless && !s->keyless_ok)
        return 1;
    int has_tags = e->have_tags && e->tags.n > 0;
    if (has_tags) {
        const unsigned char *g = e->tags.p;
        Py_ssize_t gn = e->tags.n;
        if (gn > s->tag_max || ascii_space(g[0]) || ascii_space(g[gn - 1]))
            return 1;
        for (Py_ssize_t i = 0; i + 1 < gn; i++)
            if (g[i] == '|' && g[i + 1] == '|')
                return 1;
    }
    /* the keys: split on spaces, empty pieces dropped */
    span keys[64];
    int nkeys = 0;
    Py_ssize_t keys_len = 0; /* joined by one space */
    if (e->have_keys) {
        Py_ssize_t i = 0, kn = e->keys.n;
        const unsigned char *k = e->keys.p;
        while (i < kn) {
            while (i < kn && k[i] == ' ')
                i++;
            Py_ssize_t start = i;
            while (i < kn && k[i] != ' ')
                i++;
            if (i > start) {
                if (nkeys == 64 || nkeys >= s->keys_count_max || i - start > s->key_max)
                    return 1;
                keys[nkeys].p = k + start, keys[nkeys].n = i - start;
                keys_len += (nkeys ? 1 : 0) + (i - start);
                nkeys++;
            }
        }
    }
    /* the record's properties: user pairs, TAGS, KEYS, UNIQ_KEY, tail */
    Py_ssize_t need = 0;
    for (int u = 0; u < e->users; u++)
        need += e->user_name[u].n + e->user_value[u].n + 2;
    if (has_tags)
        need += 4 + 2 + e->tags.n;
    if (nkeys)
        need += 4 + 2 + keys_len;
    need += 8 + 2 + (keyless ? KEYLESS_ID_LEN : e->uniq.n) + s->tail_len;
    long long pairs = e->users + has_tags + (nkeys > 0) + 1 + s->tail_pairs;
    if (pairs > s->count_max || need > s->props_max)
        return 1;
    if (need > s->out_cap) {
        if (s->out_heap)
            PyMem_Free(s->out);
        s->out_cap = need > 1024 ? need : 1024;
        s->out = PyMem_Malloc((size_t)s->out_cap);
        s->out_heap = 1;
        if (s->out == NULL) {
            s->out_cap = 0;
            PyErr_NoMemory();
            return -1;
        }
    }
    unsigned char *out = s->out;
    unsigned char *w = out;
#define PUT(src, len) (memcpy(w, (src), (size_t)(len)), w += (len))
    for (int u = 0; u < e->users; u++) {
        PUT(e->user_name[u].p, e->user_name[u].n);
        *w++ = 0x01;
        PUT(e->user_value[u].p, e->user_value[u].n);
        *w++ = 0x02;
    }
    if (has_tags) {
        PUT("TAGS\x01", 5);
        PUT(e->tags.p, e->tags.n);
        *w++ = 0x02;
    }
    if (nkeys) {
        PUT("KEYS\x01", 5);
        for (int k = 0; k < nkeys; k++) {
            if (k)
                *w++ = ' ';
            PUT(keys[k].p, keys[k].n);
        }
        *w++ = 0x02;
    }
    PUT("UNIQ_KEY\x01", 9);
    if (!keyless) { /* keyless: the properties end here, keyless_fill adds the id and the tail */
        PUT(e->uniq.p, e->uniq.n);
        *w++ = 0x02;
        PUT(s->tail, s->tail_len);
    }
#undef PUT
    /* the Python objects of the entry */
    int32_t code = 0;
    if (has_tags) {
        uint32_t h = 0;
        for (Py_ssize_t i = 0; i < e->tags.n; i++)
            h = 31u * h + e->tags.p[i];
        code = (int32_t)h;
    }
    PyObject *body;
    if (body_obj != NULL) {
        body = body_obj;
        Py_INCREF(body);
    } else {
        body = PyBytes_FromStringAndSize((const char *)d, body_len);
    }
    PyObject *encoded = PyBytes_FromStringAndSize((const char *)out, w - out);
    PyObject *code_obj = PyLong_FromLong(code);
    PyObject *id = keyless ? NULL : ascii_str(e->uniq.p, e->uniq.n);
    PyObject *keys_tuple = PyTuple_New(nkeys + !keyless);
    int bad = !body || !encoded || !code_obj || (!keyless && !id) || !keys_tuple;
    if (!bad) {
        for (int k = 0; k < nkeys; k++) {
            PyObject *key = ascii_str(keys[k].p, keys[k].n);
            if (key == NULL) {
                bad = 1;
                break;
            }
            PyTuple_SET_ITEM(keys_tuple, k, key);
        }
    }
    if (!bad) {
        if (!keyless) {
            Py_INCREF(id);
            PyTuple_SET_ITEM(keys_tuple, nkeys, id);
        }
        if (s->bodies == NULL) { /* one message: the caller takes the references */
            s->got[0] = body, s->got[1] = encoded, s->got[2] = code_obj, s->got[3] = keys_tuple, s->got[4] = id;
            return 0;
        }
        bad = PyList_Append(s->bodies, body) < 0 || PyList_Append(s->properties, encoded) < 0
              || PyList_Append(s->codes, code_obj) < 0 || PyList_Append(s->index_keys, keys_tuple) < 0
              || PyList_Append(s->ids, id) < 0;
    }
    Py_XDECREF(body);
    Py_XDECREF(encoded);
    Py_XDECREF(code_obj);
    Py_XDECREF(id);
    Py_XDECREF(keys_tuple);
    return bad ? -1 : 0;
}

/* the limits (args[first .. first + 5]) and tail into the state, and (lists) its lists, entry and
 * buffer (else the caller sets s->e, s->out and s->out_cap); -1: an error is set */
static int state_open(scan_state *s, PyObject *const *args, int first, Py_buffer *tail, int lists)
{
    memset(s, 0, sizeof(*s));
    long long lim[6];
    for (int i = 0; i < 6; i++) {
        lim[i] = PyLong_AsLongLong(args[first + i]);
        if (lim[i] == -1 && PyErr_Occurred())
            return -1;
    }
    s->body_max = lim[0], s->tag_max = lim[1], s->keys_count_max = lim[2], s->key_max = lim[3],
    s->count_max = lim[4], s->props_max = lim[5];
    s->tail = tail->buf;
    s->tail_len = tail->len;
    for (Py_ssize_t i = 0; i < tail->len; i++)
        s->tail_pairs += s->tail[i] == 0x02;
    if (!lists)
        return 0;
    s->bodies = PyList_New(0), s->properties = PyList_New(0), s->codes = PyList_New(0),
    s->index_keys = PyList_New(0), s->ids = PyList_New(0);
    s->e = PyMem_Malloc(sizeof(entry_props));
    s->e_heap = 1;
    if (!s->bodies || !s->properties || !s->codes || !s->index_keys || !s->ids)
        return -1;
    if (s->e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* the columns: (bodies, properties, tags_codes, index_keys, message_ids, body_total) */
static PyObject *state_result(scan_state *s, long long body_total)
{
    PyObject *result = NULL;
    PyObject *b = PyList_AsTuple(s->bodies), *p = PyList_AsTuple(s->properties), *c = PyList_AsTuple(s->codes),
             *k = PyList_AsTuple(s->index_keys), *n = PyLong_FromLongLong(body_total);
    if (b && p && c && k && n)
        result = PyTuple_Pack(6, b, p, c, k, s->ids, n);
    Py_XDECREF(b);
    Py_XDECREF(p);
    Py_XDECREF(c);
    Py_XDECREF(k);
    Py_XDECREF(n);
    return result;
}

static void state_close(scan_state *s)
{
    if (s->e_heap)
        PyMem_Free(s->e);
    if (s->out_heap)
        PyMem_Free(s->out);
    Py_XDECREF(s->bodies);
    Py_XDECREF(s->properties);
    Py_XDECREF(s->codes);
    Py_XDECREF(s->index_keys);
    Py_XDECREF(s->ids);
}

/* room for n items in a fresh empty list (its size stays 0): the appends that follow reallocate
 * nothing; -1: MemoryError */
static int list_room(PyObject *list, Py_ssize_t n)
{
    PyListObject *l = (PyListObject *)list;
    if (n <= l->allocated)
        return 0;
    PyObject **items = PyMem_Realloc(l->ob_item, (size_t)n * sizeof(PyObject *));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    l->ob_item = items;
    l->allocated = n;
    return 0;
}

static PyObject *py_lane_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "lane_scan takes 8 arguments");
        return NULL;
    }
    Py_buffer data, tail;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &tail, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    const unsigned char *d = data.buf;
    const Py_ssize_t size = data.len;
    scan_state s;
    PyObject *result = NULL;
    long long body_total = 0;
    if (state_open(&s, args, 2, &tail, 1) < 0)
        goto error;

    Py_ssize_t pos = 0;
    if (size == 0)
        goto declined;
    /* the entries counted by their TOTALSIZE words first (the loop below checks them): the five lists
     * get room for all at once instead of growing append by append */
    Py_ssize_t entries = 0;
    for (Py_ssize_t at = 0; size - at >= ENTRY_HEAD; entries++) {
        uint64_t total = get_u32(d + at);
        if (total < ENTRY_HEAD || total > (uint64_t)(size - at))
            break;
        at += (Py_ssize_t)total;
    }
    if (list_room(s.bodies, entries) < 0 || list_room(s.properties, entries) < 0 || list_room(s.codes, entries) < 0
        || list_room(s.index_keys, entries) < 0 || list_room(s.ids, entries) < 0)
        goto error;
    while (pos < size) {
        if (size - pos < ENTRY_HEAD)
            goto declined;
        uint64_t total = get_u32(d + pos);
        uint64_t body_len = get_u32(d + pos + 16);
        uint64_t body_start = (uint64_t)pos + ENTRY_HEAD;
        uint64_t props_at = body_start + body_len;
        if (props_at + 2 > (uint64_t)size)
            goto declined;
        uint64_t end = props_at + 2 + ((uint64_t)d[props_at] << 8 | d[props_at + 1]);
        if (end > (uint64_t)size || total != end - (uint64_t)pos)
            goto declined;
        int got = scan_entry(&s, d + body_start, (Py_ssize_t)body_len, NULL, d + props_at + 2,
                             (Py_ssize_t)(end - props_at - 2));
        if (got < 0)
            goto error;
        if (got > 0)
            goto declined;
        body_total += (long long)body_len;
        pos = (Py_ssize_t)end;
    }
    result = state_result(&s, body_total);
    goto done;
declined:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    state_close(&s);
    PyBuffer_Release(&data);
    PyBuffer_Release(&tail);
    return result;
}

/* One SEND_MESSAGE(_V2) message: its body (bytes, kept as the record's body) and its header's
 * properties (str) read as lane_scan reads a batch entry, into the same columns of one message; None
 * for what lane_scan declines in an entry, and for a body that is not bytes or properties that are
 * not ASCII. */
static PyObject *py_one_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "one_scan takes 9 or 10 arguments");
        return NULL;
    }
    int keyless_ok = 0;
    if (nargs == 10 && (keyless_ok = PyObject_IsTrue(args[9])) < 0)
        return NULL;
    PyObject *body = args[0], *text = args[1];
    if (!PyBytes_CheckExact(body) || !PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    Py_buffer tail;
    if (PyObject_GetBuffer(args[2], &tail, PyBUF_SIMPLE) < 0)
        return NULL;
    scan_state s;
    entry_props e;
    unsigned char small[1024];
    PyObject *result = NULL;
    if (state_open(&s, args, 3, &tail, 0) < 0)
        goto done;
    s.e = &e, s.out = small, s.out_cap = (Py_ssize_t)sizeof small;
    s.keyless_ok = keyless_ok;
    Py_ssize_t body_len = PyBytes_GET_SIZE(body);
    int got = scan_entry(&s, (const unsigned char *)PyBytes_AS_STRING(body), body_len, body,
                         PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text));
    if (got > 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if (got == 0) {
        /* (bodies, properties, tags_codes, index_keys) as 1-tuples, [id] ([] keyless), body_total */
        PyObject *parts = PyTuple_New(6), *ids = PyList_New(s.got[4] != NULL),
                 *total = PyLong_FromSsize_t(body_len);
        int bad = !parts || !ids || !total;
        for (int i = 0; i < 4; i++) {
            PyObject *one = bad ? NULL : PyTuple_New(1);
            if (one == NULL) {
                Py_DECREF(s.got[i]);
                bad = 1;
                continue;
            }
            PyTuple_SET_ITEM(one, 0, s.got[i]);
            PyTuple_SET_ITEM(parts, i, one);
        }
        if (bad) {
            Py_XDECREF(s.got[4]);
            Py_XDECREF(ids);
            Py_XDECREF(total);
            Py_XDECREF(parts);
        } else {
            if (s.got[4] != NULL)
                PyList_SET_ITEM(ids, 0, s.got[4]);
            PyTuple_SET_ITEM(parts, 4, ids);
            PyTuple_SET_ITEM(parts, 5, total);
            result = parts;
        }
    }
done:
    state_close(&s);
    PyBuffer_Release(&tail);
    return result;
}

/* keyless_fill(head, keys, tail, prefix, sequence) -> (properties, index_keys, message_id): a keyless
 * one_scan's message completed with the id the lane makes for it (SendService.lane_one, after its
 * clock reading): message_id = prefix (msgid.id_prefix, 26 ASCII characters) + "%08X" % sequence
 * (msgid.next_sequence, below 2**32); properties = head + the id + \x02 + tail; index_keys = keys +
 * (message_id,). Its reference is msgid.new_message_id and SendService.lane_append. It never
 * declines (the id is drawn): anything else than those types raises. */
static PyObject *py_keyless_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char HEX[] = "0123456789ABCDEF";
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "keyless_fill takes 5 arguments");
        return NULL;
    }
    PyObject *head = args[0], *keys = args[1], *tail = args[2], *prefix = args[3];
    if (!PyBytes_CheckExact(head) || !PyTuple_CheckExact(keys) || !PyBytes_CheckExact(tail)
        || !PyUnicode_CheckExact(prefix) || !PyLong_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "keyless_fill takes (bytes, tuple, bytes, str, int)");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(prefix) || PyUnicode_GET_LENGTH(prefix) != KEYLESS_ID_LEN - 8) {
        PyErr_SetString(PyExc_ValueError, "keyless_fill: the id prefix is not 26 ASCII characters");
        return NULL;
    }
    unsigned long long sequence = PyLong_AsUnsignedLongLong(args[4]);
    if (sequence == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (sequence > 0xFFFFFFFFull) {
        PyErr_SetString(PyExc_ValueError, "keyless_fill: the sequence is not below 2**32");
        return NULL;
    }
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys), hn = PyBytes_GET_SIZE(head), tn = PyBytes_GET_SIZE(tail);
    PyObject *id = PyUnicode_New(KEYLESS_ID_LEN, 127);
    PyObject *properties = PyBytes_FromStringAndSize(NULL, hn + KEYLESS_ID_LEN + 1 + tn);
    PyObject *index_keys = PyTuple_New(nkeys + 1);
    PyObject *result = PyTuple_New(3);
    if (!id || !properties || !index_keys || !result) {
        Py_XDECREF(id);
        Py_XDECREF(properties);
        Py_XDECREF(index_keys);
        Py_XDECREF(result);
        return NULL;
    }
    unsigned char *text = PyUnicode_1BYTE_DATA(id);
    memcpy(text, PyUnicode_1BYTE_DATA(prefix), KEYLESS_ID_LEN - 8);
    for (int i = 0; i < 8; i++)
        text[KEYLESS_ID_LEN - 1 - i] = (unsigned char)HEX[(sequence >> (4 * i)) & 0xF];
    char *w = PyBytes_AS_STRING(properties);
    memcpy(w, PyBytes_AS_STRING(head), (size_t)hn);
    memcpy(w + hn, text, KEYLESS_ID_LEN);
    w[hn + KEYLESS_ID_LEN] = 0x02;
    memcpy(w + hn + KEYLESS_ID_LEN + 1, PyBytes_AS_STRING(tail), (size_t)tn);
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        Py_INCREF(key);
        PyTuple_SET_ITEM(index_keys, k, key);
    }
    Py_INCREF(id);
    PyTuple_SET_ITEM(index_keys, nkeys, id);
    PyTuple_SET_ITEM(result, 0, properties);
    PyTuple_SET_ITEM(result, 1, index_keys);
    PyTuple_SET_ITEM(result, 2, id);
    return result;
}

/* the names the scan reads (TAGS, KEYS, UNIQ_KEY), declines and drops, for the test that holds them
 * to txmq.common.properties */
static PyObject *py_lane_names(PyObject *self, PyObject *unused)
{
    PyObject *taken = PyTuple_New(COUNT(TAKEN)), *declined = PyTuple_New(COUNT(DECLINED)),
             *dropped = PyTuple_New(COUNT(DROPPED));
    if (!taken || !declined || !dropped)
        goto fail;
    for (int i = 0; i < COUNT(TAKEN); i++) {
        PyObject *s = PyUnicode_FromString(TAKEN[i]);
        if (s == NULL)
            goto fail;
        PyTuple_SET_ITEM(taken, i, s);
    }
    for (int i = 0; i < COUNT(DECLINED); i++) {
        PyObject *s = PyUnicode_FromString(DECLINED[i]);
        if (s == NULL)
            goto fail;
        PyTuple_SET_ITEM(declined, i, s);
    }
    for (int i = 0; i < COUNT(DROPPED); i++) {
        PyObject *s = PyUnicode_FromString(DROPPED[i]);
        if (s == NULL)
            goto fail;
        PyTuple_SET_ITEM(dropped, i, s);
    }
    return Py_BuildValue("(NNN)", taken, declined, dropped);
fail:
    Py_XDECREF(taken);
    Py_XDECREF(declined);
    Py_XDECREF(dropped);
    return NULL;
}

static PyMethodDef methods[] = {
    {"lane_scan", (PyCFunction)(void (*)(void))py_lane_scan, METH_FASTCALL,
     "A plain SEND_BATCH_MESSAGE body as the send lane's columns, or None (see the module's source)."},
    {"one_scan", (PyCFunction)(void (*)(void))py_one_scan, METH_FASTCALL,
     "A plain SEND_MESSAGE(_V2)'s body and properties as the send lane's columns, or None."},
    {"keyless_fill", (PyCFunction)(void (*)(void))py_keyless_fill, METH_FASTCALL,
     "A keyless one_scan's properties, index keys and message id, given the id's prefix and sequence."},
    {"lane_names", py_lane_names, METH_NOARGS, "(taken, declined, dropped) property names."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.server.remoting._lanescan", "A batch body into the send lane's columns, in C.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lanescan(void)
{
    return PyModule_Create(&module);
}
