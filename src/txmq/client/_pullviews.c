/* txmq.client._pullviews: a remoting pull body's records straight into MessageView objects, in C.
 *
 *   setup(cls, fields, normal, message_type, offset_message_id) -> None
 *   views(data) -> list[MessageView] | None
 *
 * views() gives what _remoting_convert._pulled_views_py gives for the same body (decode_pulled,
 * then _pulled_view for each record): the same fields, field by field, in the same order; the
 * property dicts hold the same pairs in the same order. setup() is called once, at the import of
 * _remoting_convert, with MessageView, the names of its dataclass fields (checked against the
 * order below), MessageType.NORMAL, _remoting_convert._message_type (called for a record whose
 * properties name a message type other than by a MessageType member name, a group, a transaction
 * flag, a delay or a delivery time) and msgid.offset_message_id (called for a record without a
 * UNIQ_KEY). A type named by a member name is looked up in dict(MessageType.__members__), built here
 * from the class of ``normal`` as _remoting_convert._MESSAGE_TYPES is.
 *
 * A view is allocated by the class's tp_alloc and its slots filled through the offsets of its
 * member descriptors, as the class's own __init__ (common/fastinit.slot_init: one slot store per
 * field, nothing else) fills them, without running that interpreted __init__.
 *
 * None for anything the reference path would treat otherwise or that is not the common case: a
 * record that is not a plain IPv4 V1/V2 record or is malformed, a topic that is not UTF-8,
 * properties that are not all ASCII or hold an entry without a name/value separator, an integer
 * text int() would refuse (too many digits), data that is not bytes, setup() not called. The caller
 * then runs the reference, which gives its result or its error. Written for txmq; no code copied.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* MessageView's fields, in dataclass order (setup() checks the class has exactly these). */
static const char *const FIELDS[] = {
    "topic", "body", "message_id", "queue_id", "queue_offset", "commit_log_offset", "born_timestamp_ms",
    "store_timestamp_ms", "tags", "keys", "properties", "message_group", "delivery_timestamp_ms",
    "message_type", "reconsume_times", "delivery_attempt", "receipt_handle", "transaction_id",
    "born_host", "store_host", "store_size", "raw_properties",
};
enum {
    F_TOPIC, F_BODY, F_ID, F_QUEUE_ID, F_QUEUE_OFFSET, F_PHYS, F_BORN_TS, F_STORE_TS, F_TAGS, F_KEYS,
    F_PROPS, F_GROUP, F_DELIVER, F_TYPE, F_RECONSUME, F_ATTEMPT, F_RECEIPT, F_TX_ID, F_BORN_HOST,
    F_STORE_HOST, F_SIZE, F_RAW, N_FIELDS
};

/* Property names the view reads (common/properties.py) and a few every SDK message carries. */
static const char *const KNOWN[] = {
    "UNIQ_KEY", "TAGS", "KEYS", "RETRY_TOPIC", "RECONSUME_TIME", "TIMER_DELIVER_MS", "__SHARDINGKEY",
    "__transactionId__", "__TXMQ_TYPE", "TRAN_MSG", "DELAY",
    /* not read, only common */
    "PGROUP", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "REAL_TOPIC", "REAL_QID", "CLUSTER",
    "MAX_RECONSUME_TIMES", "ORIGIN_MESSAGE_ID", "TRANSACTION_CHECK_TIMES", "__TXMQ_BORN_HOST",
    "__TXMQ_ATTEMPT",
};
enum {
    K_UNIQ, K_TAGS, K_KEYS, K_RETRY_TOPIC, K_RECONSUME, K_DELIVER, K_SHARDING, K_TX_ID, K_TYPE,
    K_TRAN_MSG, K_DELAY, K_READ = K_DELAY + 1, /* the ones read: their values are remembered per record */
    N_KNOWN = (int)(sizeof(KNOWN) / sizeof(KNOWN[0]))
};

static PyTypeObject *view_type;
static Py_ssize_t offsets[N_FIELDS];
static PyObject *normal_type;        /* MessageType.NORMAL */
static PyObject *types_by_name;      /* dict(MessageType.__members__), as _remoting_convert._MESSAGE_TYPES */
static PyObject *message_type_fn;    /* _remoting_convert._message_type */
static PyObject *offset_id_fn;       /* msgid.offset_message_id */
static PyObject *known[N_KNOWN];     /* interned, hashed */
static unsigned char known_len[N_KNOWN];
static PyObject *space;              /* " " */

#define V4_SIZE 88 /* message_codec._V4_FIXED.size */
#define MAGIC_V1 ((int32_t)0xDAA320A7) /* message_codec.MAGIC_V1 */
#define MAGIC_V2 ((int32_t)0xDAA320AB) /* message_codec.MAGIC_V2 */
#define V6_FLAGS (0x10 | 0x20) /* BORNHOST_V6_FLAG | STOREHOST_V6_FLAG */

static inline int32_t i32_at(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int64_t i64_at(const unsigned char *p)
{
    uint64_t hi = (uint32_t)i32_at(p), lo = (uint32_t)i32_at(p + 4);
    return (int64_t)((hi << 32) | lo);
}

static int all_ascii(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ULL)
            return 0;
    }
    for (; i < n; i++)
        if (p[i] >= 0x80)
            return 0;
    return 1;
}

/* A new str of n ASCII bytes. */
static PyObject *ascii_text(const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL && n)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

static int known_index(const unsigned char *p, Py_ssize_t n)
{
    for (int i = 0; i < N_KNOWN; i++)
        if (known_len[i] == n && memcmp(PyUnicode_1BYTE_DATA(known[i]), p, (size_t)n) == 0)
            return i;
    return -1;
}

/* str.isdecimal() of an ASCII str: not empty, every character a digit. */
static int is_decimal(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const unsigned char *p = PyUnicode_1BYTE_DATA(s);
    if (n == 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* Non-empty str (borrowed) or NULL. */
static inline PyObject *truthy(PyObject *s)
{
    return s != NULL && PyUnicode_GET_LENGTH(s) > 0 ? s : NULL;
}

/* "a.b.c.d:port" */
static PyObject *host_text(const unsigned char *ip, int32_t port)
{
    return PyUnicode_FromFormat("%u.%u.%u.%u:%d", ip[0], ip[1], ip[2], ip[3], (int)port);
}

/* The last host seen in this call, and its text. */
typedef struct {
    unsigned char ip[4];
    int32_t port;
    PyObject *text; /* owned */
} host_cache;

static PyObject *cached_host(host_cache *c, const unsigned char *ip, int32_t port)
{
    if (c->text == NULL || c->port != port || memcmp(c->ip, ip, 4) != 0) {
        PyObject *t = host_text(ip, port);
        if (t == NULL)
            return NULL;
        Py_XSETREF(c->text, t);
        memcpy(c->ip, ip, 4);
        c->port = port;
    }
    Py_INCREF(c->text);
    return c->text;
}

/* Fill the view's slots (steals every reference in values). */
static PyObject *new_view(PyObject **values)
{
    PyObject *view = view_type->tp_alloc(view_type, 0);
    if (view == NULL) {
        for (int i = 0; i < N_FIELDS; i++)
            Py_XDECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < N_FIELDS; i++)
        *(PyObject **)((char *)view + offsets[i]) = values[i];
    return view;
}

#define DECLINE 1 /* not for this path: the reference decides */
#define FAILED 2  /* a Python error is set (memory) */

/* The properties (ASCII, checked) as _pulled_view decodes them: a dict of the pairs in order, a
 * name named twice keeping its first place and its last value; read[] gets the (borrowed) values
 * of the names the view reads (NULL: absent), always the value the dict holds now. */
static int parse_properties(const unsigned char *p, Py_ssize_t n, PyObject *dict, PyObject **read,
                            PyObject **value_cache)
{
    Py_ssize_t at = 0;
    while (at <= n) {
        const unsigned char *item = p + at;
        const unsigned char *stop = memchr(item, 0x02, (size_t)(n - at));
        Py_ssize_t len = stop != NULL ? stop - item : n - at;
        at += len + 1;
        if (len == 0)
            continue;
        const unsigned char *sep = memchr(item, 0x01, (size_t)len);
        if (sep == NULL)
            return DECLINE; /* props.decode raises InvalidProperty: the reference path judges */
        Py_ssize_t name_len = sep - item, value_len = len - name_len - 1;
        int k = known_index(item, name_len);
        PyObject *name;
        if (k >= 0) {
            name = known[k];
            Py_INCREF(name);
        } else if ((name = ascii_text(item, name_len)) == NULL) {
            return FAILED;
        }
        PyObject *value;
        PyObject *last = k >= 0 ? value_cache[k] : NULL;
        if (last != NULL && PyUnicode_GET_LENGTH(last) == value_len &&
            memcmp(PyUnicode_1BYTE_DATA(last), sep + 1, (size_t)value_len) == 0) {
            value = last;
            Py_INCREF(value);
        } else {
            value = ascii_text(sep + 1, value_len);
            if (value == NULL) {
                Py_DECREF(name);
                return FAILED;
            }
            if (k >= 0) {
                Py_INCREF(value);
                Py_XSETREF(value_cache[k], value);
            }
        }
        int rc = PyDict_SetItem(dict, name, value);
        Py_DECREF(name);
        if (rc < 0) {
            Py_DECREF(value);
            return FAILED;
        }
        if (k >= 0 && k < K_READ)
            read[k] = value; /* borrowed: the dict holds it */
        Py_DECREF(value);
    }
    return 0;
}

/* tuple(filter(None, text.split(" "))) */
static PyObject *split_keys(PyObject *text)
{
    PyObject *parts = PyUnicode_Split(text, space, -1);
    if (parts == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(parts), kept = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_GET_LENGTH(PyList_GET_ITEM(parts, i)) > 0)
            kept++;
    PyObject *keys = PyTuple_New(kept);
    if (keys != NULL) {
        Py_ssize_t j = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *part = PyList_GET_ITEM(parts, i);
            if (PyUnicode_GET_LENGTH(part) > 0) {
                Py_INCREF(part);
                PyTuple_SET_ITEM(keys, j++, part);
            }
        }
    }
    Py_DECREF(parts);
    return keys;
}

/* int(text) of a decimal ASCII str; DECLINE-worthy (NULL, no error) when int() would refuse it. */
static PyObject *decimal_int(PyObject *text, int *status)
{
    PyObject *value = PyLong_FromUnicodeObject(text, 10);
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_ValueError)) { /* the digits limit: the reference raises */
            PyErr_Clear();
            *status = DECLINE;
        } else {
            *status = FAILED;
        }
    }
    return value;
}

typedef struct {
    PyObject *topic_text; /* owned: the last topic's str */
    const unsigned char *topic_raw;
    Py_ssize_t topic_len;
    host_cache born, store;
    PyObject *value_cache[N_KNOWN];
} call_state;

static void state_clear(call_state *s)
{
    Py_CLEAR(s->topic_text);
    Py_CLEAR(s->born.text);
    Py_CLEAR(s->store.text);
    for (int i = 0; i < N_KNOWN; i++)
        Py_CLEAR(s->value_cache[i]);
}

/* One record at d[pos:end] (its fixed part checked): a new view in *out, or DECLINE / FAILED. */
static int one_view(call_state *s, const unsigned char *d, Py_ssize_t pos, Py_ssize_t end, PyObject **out)
{
    const unsigned char *r = d + pos;
    int32_t total = i32_at(r), magic = i32_at(r + 4), queue_id = i32_at(r + 12);
    int64_t queue_offset = i64_at(r + 20), phys = i64_at(r + 28);
    int64_t born_ts = i64_at(r + 40);
    const unsigned char *born_ip = r + 48;
    int32_t born_port = i32_at(r + 52);
    int64_t store_ts = i64_at(r + 56);
    const unsigned char *store_ip = r + 64;
    int32_t store_port = i32_at(r + 68), reconsume = i32_at(r + 72), body_len = i32_at(r + 84);
    Py_ssize_t p = pos + V4_SIZE + (Py_ssize_t)body_len;
    if (p > end)
        return DECLINE;
    Py_ssize_t topic_end, topic_start;
    if (magic == MAGIC_V1) {
        if (p >= end)
            return DECLINE;
        topic_start = p + 1;
        topic_end = topic_start + d[p];
    } else if (magic == MAGIC_V2) {
        if (p + 1 >= end)
            return DECLINE;
        topic_start = p + 2;
        topic_end = topic_start + (((Py_ssize_t)d[p] << 8) | d[p + 1]);
    } else {
        return DECLINE;
    }
    if (topic_end + 2 > end)
        return DECLINE;
    Py_ssize_t props_start = topic_end + 2;
    Py_ssize_t props_end = props_start + (((Py_ssize_t)d[topic_end] << 8) | d[topic_end + 1]);
    if (props_end > end)
        return DECLINE;
    if (!all_ascii(d + props_start, props_end - props_start))
        return DECLINE;
    (void)total;

    Py_ssize_t topic_len = topic_end - topic_start;
    if (s->topic_text == NULL || s->topic_len != topic_len ||
        memcmp(s->topic_raw, d + topic_start, (size_t)topic_len) != 0) {
        PyObject *t = PyUnicode_DecodeUTF8((const char *)d + topic_start, topic_len, "strict");
        if (t == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return FAILED;
            PyErr_Clear();
            return DECLINE;
        }
        Py_XSETREF(s->topic_text, t);
        s->topic_raw = d + topic_start;
        s->topic_len = topic_len;
    }

    PyObject *values[N_FIELDS] = {NULL};
    PyObject *read[K_READ] = {NULL};
    int status = FAILED;
    PyObject *dict = PyDict_New();
    if (dict == NULL)
        goto fail;
    values[F_PROPS] = dict;
    int rc = parse_properties(d + props_start, props_end - props_start, dict, read, s->value_cache);
    if (rc != 0) {
        status = rc;
        goto fail;
    }
    PyObject *v;
    v = truthy(read[K_RETRY_TOPIC]);
    values[F_TOPIC] = v != NULL ? v : s->topic_text;
    Py_INCREF(values[F_TOPIC]);
    if ((values[F_BODY] = PyBytes_FromStringAndSize((const char *)r + V4_SIZE, body_len)) == NULL)
        goto fail;
    v = truthy(read[K_UNIQ]);
    if (v != NULL) {
        Py_INCREF(v);
        values[F_ID] = v;
    } else {
        PyObject *ip = PyUnicode_FromFormat("%u.%u.%u.%u", store_ip[0], store_ip[1], store_ip[2], store_ip[3]);
        if (ip == NULL)
            goto fail;
        values[F_ID] = PyObject_CallFunction(offset_id_fn, "NiL", ip, (int)store_port, (long long)phys);
        if (values[F_ID] == NULL)
            goto fail;
    }
    if ((values[F_QUEUE_ID] = PyLong_FromLong(queue_id)) == NULL ||
        (values[F_QUEUE_OFFSET] = PyLong_FromLongLong(queue_offset)) == NULL ||
        (values[F_PHYS] = PyLong_FromLongLong(phys)) == NULL ||
        (values[F_BORN_TS] = PyLong_FromLongLong(born_ts)) == NULL ||
        (values[F_STORE_TS] = PyLong_FromLongLong(store_ts)) == NULL)
        goto fail;
    v = truthy(read[K_TAGS]);
    values[F_TAGS] = v != NULL ? v : Py_None;
    Py_INCREF(values[F_TAGS]);
    v = truthy(read[K_KEYS]);
    if ((values[F_KEYS] = v != NULL ? split_keys(v) : PyTuple_New(0)) == NULL)
        goto fail;
    v = truthy(read[K_SHARDING]);
    values[F_GROUP] = v != NULL ? v : Py_None;
    Py_INCREF(values[F_GROUP]);
    v = read[K_DELIVER];
    if (v != NULL && is_decimal(v)) {
        if ((values[F_DELIVER] = decimal_int(v, &status)) == NULL) {
            status = status == DECLINE ? DECLINE : FAILED;
            goto fail;
        }
    } else {
        values[F_DELIVER] = Py_None;
        Py_INCREF(Py_None);
    }
    /* _message_type's first step here: a type named by its member name (the broker names every
     * record's); anything else is asked of _message_type itself */
    PyObject *named = read[K_TYPE] != NULL ? PyDict_GetItemWithError(types_by_name, read[K_TYPE]) : NULL;
    if (named != NULL) {
        values[F_TYPE] = named;
        Py_INCREF(named);
    } else if (PyErr_Occurred()) {
        goto fail;
    } else if (read[K_TYPE] != NULL || read[K_SHARDING] != NULL || read[K_TRAN_MSG] != NULL ||
               read[K_DELAY] != NULL || read[K_DELIVER] != NULL) {
        if ((values[F_TYPE] = PyObject_CallOneArg(message_type_fn, dict)) == NULL)
            goto fail;
    } else {
        values[F_TYPE] = normal_type;
        Py_INCREF(normal_type);
    }
    v = read[K_RECONSUME];
    if (v != NULL && is_decimal(v)) {
        if ((values[F_RECONSUME] = decimal_int(v, &status)) == NULL) {
            status = status == DECLINE ? DECLINE : FAILED;
            goto fail;
        }
        PyObject *one = PyLong_FromLong(1);
        if (one == NULL)
            goto fail;
        values[F_ATTEMPT] = PyNumber_Add(values[F_RECONSUME], one);
        Py_DECREF(one);
        if (values[F_ATTEMPT] == NULL)
            goto fail;
    } else if ((values[F_RECONSUME] = PyLong_FromLong(reconsume)) == NULL ||
               (values[F_ATTEMPT] = PyLong_FromLongLong((long long)reconsume + 1)) == NULL) {
        goto fail;
    }
    values[F_RECEIPT] = Py_None;
    Py_INCREF(Py_None);
    v = truthy(read[K_TX_ID]);
    values[F_TX_ID] = v != NULL ? v : Py_None;
    Py_INCREF(values[F_TX_ID]);
    if ((values[F_BORN_HOST] = cached_host(&s->born, born_ip, born_port)) == NULL ||
        (values[F_STORE_HOST] = cached_host(&s->store, store_ip, store_port)) == NULL ||
        (values[F_SIZE] = PyLong_FromLong(total)) == NULL)
        goto fail;
    values[F_RAW] = Py_None;
    Py_INCREF(Py_None);
    if ((*out = new_view(values)) == NULL)
        return FAILED;
    return 0;
fail:
    for (int i = 0; i < N_FIELDS; i++)
        Py_XDECREF(values[i]);
    return status;
}

static PyObject *py_views(PyObject *self, PyObject *data)
{
    (void)self;
    if (view_type == NULL || !PyBytes_CheckExact(data))
        Py_RETURN_NONE;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data), pos = 0, count = 0;
    /* the records counted and their fixed parts checked first, so the list is made at its size */
    while (pos < size) {
        if (size - pos < V4_SIZE)
            Py_RETURN_NONE;
        int32_t total = i32_at(d + pos), sys_flag = i32_at(d + pos + 36), body_len = i32_at(d + pos + 84);
        if ((sys_flag & V6_FLAGS) || total < V4_SIZE || total > size - pos || body_len < 0)
            Py_RETURN_NONE;
        pos += total;
        count++;
    }
    PyObject *result = PyList_New(count);
    if (result == NULL)
        return NULL;
    call_state s;
    memset(&s, 0, sizeof(s));
    pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t end = pos + i32_at(d + pos);
        PyObject *view = NULL;
        int rc = one_view(&s, d, pos, end, &view);
        if (rc != 0) {
            state_clear(&s);
            Py_DECREF(result);
            if (rc == FAILED)
                return NULL;
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(result, i, view);
        pos = end;
    }
    state_clear(&s);
    return result;
}

static PyObject *py_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "setup(cls, fields, normal, message_type, offset_message_id)");
        return NULL;
    }
    PyObject *cls = args[0], *fields = args[1];
    if (!PyType_Check(cls) || !PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != N_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "_pullviews.setup: not MessageView and its field names");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_itemsize != 0 || type->tp_dictoffset != 0 || type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "_pullviews.setup: the class is not a plain slotted class");
        return NULL;
    }
    Py_ssize_t found[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, FIELDS[i]) != 0) {
            PyErr_Format(PyExc_TypeError, "_pullviews.setup: field %d is not %s", i, FIELDS[i]);
            return NULL;
        }
        PyObject *descr = PyDict_GetItemWithError(type->tp_dict, name);
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "_pullviews.setup: %s is not a slot", FIELDS[i]);
            return NULL;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) || member->offset <= 0 ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "_pullviews.setup: %s is not an object slot", FIELDS[i]);
            return NULL;
        }
        found[i] = member->offset;
    }
    PyObject *members = PyObject_GetAttrString((PyObject *)Py_TYPE(args[2]), "__members__");
    if (members == NULL)
        return NULL;
    PyObject *by_name = PyDict_New();
    if (by_name == NULL || PyDict_Update(by_name, members) < 0) {
        Py_DECREF(members);
        Py_XDECREF(by_name);
        return NULL;
    }
    Py_DECREF(members);
    Py_XSETREF(types_by_name, by_name);
    memcpy(offsets, found, sizeof(offsets));
    Py_INCREF(args[2]);
    Py_XSETREF(normal_type, args[2]);
    Py_INCREF(args[3]);
    Py_XSETREF(message_type_fn, args[3]);
    Py_INCREF(args[4]);
    Py_XSETREF(offset_id_fn, args[4]);
    Py_INCREF(cls);
    Py_XSETREF(view_type, type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))py_setup, METH_FASTCALL,
     "Bind MessageView (its slot offsets), MessageType.NORMAL and the two reference helpers."},
    {"views", py_views, METH_O, "The MessageViews of a pull body, or None when the reference must judge it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.client._pullviews", "A remoting pull body into MessageViews, in C.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pullviews(void)
{
    if (known[0] == NULL) {
        for (int i = 0; i < N_KNOWN; i++) {
            size_t len = strlen(KNOWN[i]);
            if (len == 0 || len > 255) {
                PyErr_SetString(PyExc_SystemError, "_pullviews: a table name of a bad length");
                return NULL;
            }
            known[i] = PyUnicode_InternFromString(KNOWN[i]);
            if (known[i] == NULL)
                return NULL;
            (void)PyObject_Hash(known[i]);
            known_len[i] = (unsigned char)len;
        }
        space = PyUnicode_InternFromString(" ");
        if (space == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
