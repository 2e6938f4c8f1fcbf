/* txmq.client._batchsend: the per-message loops of the SDK's batch send, in C.
 *
 *   setup(result_cls, result_fields, message_cls, message_fields) -> None
 *   results(ids, queue, base, transaction_id, msg_id, recall_handle) -> list[SendResult] | None
 *   plain_total(messages, topic, body_max) -> int
 *   plain_batch(messages, prefix, sequence, id_tail, properties_max, empty) -> (body, ids) | None
 *   plain_single(message, transactional, head, now_ms, before, prefix, sequence, after, empty)
 *       -> (ext, body, id) | None   (see py_plain_single)
 *   transactional_copy(message) -> Message | None   (see py_transactional_copy)
 *   end_binary(group_pair, queue_offset, log_offset, decision, msg_id, topic_pair, check, transaction_id)
 *       -> bytes | None   (see py_end_binary)
 *   offset_id_offset(message_id) -> int | None   (see py_offset_id_offset)
 *
 * results() gives what _single.results_py gives for the same arguments (the reference: the batch
 * half of _single.send_results): for i in range(len(ids)), SendResult(ids[i], queue, base + i,
 * transaction_id, offset_ids[i] if i < len(offset_ids) else None, recall_handle) with offset_ids =
 * msg_id.split(","). None when the inputs are not the common case (ids not a list, msg_id not an
 * ASCII str, base not an int or base + len(ids) outside int64): the caller then runs the reference.
 *
 * plain_total() gives what _single.plain_total_py gives: the sum of the body lengths when every
 * message is a plain Message of ``topic`` (exactly a Message; topic an exact str equal to it; a bytes
 * body of 1..body_max bytes; no tags, keys (the empty tuple), message group, delivery time or delay
 * level; transactional False), else -1. Such a message passes every check of Producer.send_batch's
 * loop (Message.validate, Producer._validate, the batch's own) once the batch's first message did,
 * so the loop is skipped for a batch of them; -1 sends the batch through that loop, which gives its
 * errors in its order.
 *
 * plain_batch() gives a batch's fresh message ids and its SEND_BATCH_MESSAGE body in one pass, what
 * the reference gives (RemotingTransport._send_request's ids from msgid.new_message_ids, then
 * _remoting_convert.batch_body): for every message, prefix + "%08X" % (next(sequence) & 0xFFFFFFFF)
 * as its id, and the entry (int32 total, magic 0, crc 0, flag 0, body length; body; int16 properties
 * length; "UNIQ_KEY\x01", id, id_tail) as _remoting_convert._plain_batch_body lays it out. It
 * answers None, having taken nothing from sequence, unless every message is exactly a Message with
 * no id, empty properties (``empty``, Message's default mapping, or an exact empty dict), no tags, keys
 * (the empty tuple), group, delivery time, delay level or check immunity, transactional False and a
 * bytes body, prefix is an ASCII str of 26 characters, sequence an itertools.count, id_tail bytes,
 * and every entry fits
 * (properties length <= properties_max, total <= INT32_MAX): then the reference runs. The sequence's
 * numbers are taken in one run (the GIL held throughout), as new_message_ids takes them under its lock.
 *
 * setup() is called once, at the import of _single, with SendResult, Message and the names of their
 * dataclass fields (checked against the orders below). A result is allocated by the class's tp_alloc
 * and its six slots filled through the offsets of its member descriptors, as the class's own __init__
 * (common/fastinit.slot_init: one slot store per field, nothing else) fills them, without running
 * that interpreted __init__; a message's fields are read through the same offsets. Written for txmq;
 * no code copied.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* SendResult's fields, in dataclass order (setup() checks the class has exactly these). */
static const char *const FIELDS[] = {
    "message_id", "queue", "queue_offset", "transaction_id", "offset_message_id", "recall_handle",
};
enum { F_ID, F_QUEUE, F_OFFSET, F_TX_ID, F_OFFSET_ID, F_RECALL, N_FIELDS };

/* Message's fields, in dataclass order. */
static const char *const MESSAGE_FIELDS[] = {
    "topic", "body", "tags", "keys", "properties", "message_group", "delivery_timestamp_ms", "delay_level",
    "message_id", "transactional", "check_immunity_s",
};
enum {
    M_TOPIC, M_BODY, M_TAGS, M_KEYS, M_PROPS, M_GROUP, M_DELIVER, M_DELAY, M_ID, M_TRANSACTIONAL, M_IMMUNITY,
    N_MESSAGE_FIELDS
};

static PyTypeObject *result_type, *message_type;
static Py_ssize_t offsets[N_FIELDS], message_offsets[N_MESSAGE_FIELDS];

/* the object in the slot at offset (borrowed), NULL when the slot is empty */
static inline PyObject *slot(PyObject *obj, Py_ssize_t offset)
{
    return *(PyObject **)((char *)obj + offset);
}

static PyObject *py_plain_total(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "plain_total(messages, topic, body_max)");
        return NULL;
    }
    PyObject *messages = args[0], *topic = args[1];
    Py_ssize_t body_max = PyLong_AsSsize_t(args[2]);
    if (body_max == -1 && PyErr_Occurred())
        return NULL;
    if (message_type == NULL || !PyUnicode_CheckExact(topic) ||
        (!PyList_CheckExact(messages) && !PyTuple_CheckExact(messages)))
        return PyLong_FromLong(-1);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(messages);
    PyObject **items = PySequence_Fast_ITEMS(messages);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *m = items[i];
        if (Py_TYPE(m) != message_type)
            return PyLong_FromLong(-1);
        PyObject *t = slot(m, message_offsets[M_TOPIC]), *body = slot(m, message_offsets[M_BODY]);
        PyObject *keys = slot(m, message_offsets[M_KEYS]);
        if (t == NULL || body == NULL || keys == NULL || !PyBytes_CheckExact(body) ||
            slot(m, message_offsets[M_TAGS]) != Py_None || !PyTuple_CheckExact(keys) || PyTuple_GET_SIZE(keys) ||
            slot(m, message_offsets[M_GROUP]) != Py_None || slot(m, message_offsets[M_DELIVER]) != Py_None ||
            slot(m, message_offsets[M_DELAY]) != Py_None || slot(m, message_offsets[M_TRANSACTIONAL]) != Py_False)
            return PyLong_FromLong(-1);
        if (t != topic) {
            if (!PyUnicode_CheckExact(t))
                return PyLong_FromLong(-1);
            int same = PyUnicode_Compare(t, topic); /* two exact str: no error */
            if (same != 0)
                return PyLong_FromLong(-1);
        }
        Py_ssize_t size = PyBytes_GET_SIZE(body);
        if (size == 0 || size > body_max)
            return PyLong_FromLong(-1);
        total += size;
    }
    return PyLong_FromSsize_t(total);
}

#define ID_PREFIX_CHARS 26
#define ID_CHARS (ID_PREFIX_CHARS + 8)
static const char UNIQ_PAIR[] = "UNIQ_KEY\x01"; /* properties.UNIQ_KEY and NAME_VALUE_SEPARATOR */
#define UNIQ_PAIR_LEN ((Py_ssize_t)(sizeof(UNIQ_PAIR) - 1))

/* the properties mapping is empty: an exact dict of length 0 or ``empty`` itself (Message's default, a
 * mappingproxy of an empty dict); anything else is not plain (no Python code runs to find out) */
static inline int empty_properties(PyObject *props, PyObject *empty)
{
    return props == empty || (PyDict_CheckExact(props) && PyDict_GET_SIZE(props) == 0);
}

/* The body (borrowed) of a message (of the Message class) that is plain: a bytes body, no id, tags, keys,
 * group, delivery time, delay or check immunity, empty properties, and its transactional flag the object
 * given (Py_True or Py_False); NULL (no error set) for any other. */
static PyObject *plain_body(PyObject *m, PyObject *transactional, PyObject *empty)
{
    PyObject *body = slot(m, message_offsets[M_BODY]), *keys = slot(m, message_offsets[M_KEYS]);
    PyObject *props = slot(m, message_offsets[M_PROPS]);
    if (body == NULL || keys == NULL || props == NULL || !PyBytes_CheckExact(body) ||
        slot(m, message_offsets[M_ID]) != Py_None || slot(m, message_offsets[M_TAGS]) != Py_None ||
        !PyTuple_CheckExact(keys) || PyTuple_GET_SIZE(keys) || slot(m, message_offsets[M_GROUP]) != Py_None ||
        slot(m, message_offsets[M_DELIVER]) != Py_None || slot(m, message_offsets[M_DELAY]) != Py_None ||
        slot(m, message_offsets[M_TRANSACTIONAL]) != transactional ||
        slot(m, message_offsets[M_IMMUNITY]) != Py_None || !empty_properties(props, empty))
        return NULL;
    return body;
}

static PyTypeObject *count_type; /* itertools.count, looked up at the first plain_batch() */

static inline void put_be32(char *at, uint32_t value)
{
    at[0] = (char)(value >> 24);
    at[1] = (char)(value >> 16);
    at[2] = (char)(value >> 8);
    at[3] = (char)value;
}

/* count_type loaded (1), itertools.count not a type (0), or an error set (-1) */
static int load_count_type(void)
{
    if (count_type != NULL)
        return 1;
    PyObject *itertools = PyImport_ImportModule("itertools");
    if (itertools == NULL)
        return -1;
    PyObject *found = PyObject_GetAttrString(itertools, "count");
    Py_DECREF(itertools);
    if (found == NULL)
        return -1;
    if (!PyType_Check(found)) {
        Py_DECREF(found);
        return 0;
    }
    count_type = (PyTypeObject *)found; /* kept for the module's life */
    return 1;
}

static const char HEX[] = "0123456789ABCDEF";

/* the next number of sequence (an exact itertools.count) & 0xFFFFFFFF written as 8 upper-case hex digits
 * at text; -1 with an exception set */
static int next_hex8(PyObject *sequence, char *text)
{
    PyObject *next = PyIter_Next(sequence);
    if (next == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the id sequence ended");
        return -1;
    }
    unsigned long long number = PyLong_Check(next) ? PyLong_AsUnsignedLongLongMask(next) : (unsigned long long)-1;
    int bad = !PyLong_Check(next) || (number == (unsigned long long)-1 && PyErr_Occurred());
    Py_DECREF(next);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "the id sequence gave a non-int");
        return -1;
    }
    uint32_t seq = (uint32_t)(number & 0xFFFFFFFFu);
    for (int d = 0; d < 8; d++)
        text[d] = HEX[(seq >> (28 - 4 * d)) & 0xF];
    return 0;
}

#define BORN_DIGITS 13

/* plain_single(message, transactional, head, now_ms, before, prefix, sequence, after) -> (ext, body, id) | None
 *
 * One plain message's SEND_MESSAGE_V2 extFields (ROCKETMQ binary), as _single.BinarySendHeaders.request_py
 * renders them: head + the born time's 13 digits + before + id + after, the id prefix + "%08X" %
 * (next(sequence) & 0xFFFFFFFF) (what msgid.new_message_id makes). head ends with the born time pair's key and
 * length, before holds the properties pair's key and length for a 34-character id, after the rest (the
 * caller's cached parts of its group, queue and transaction flag). None, with nothing taken from sequence,
 * unless message is exactly a Message with no id, tags, group, delivery time, delay level or check immunity,
 * empty properties (``empty`` or an exact empty dict), no keys (the empty tuple), a bytes body and
 * ``transactional`` (True or False) in its transactional slot; now_ms an int of 13 digits; prefix an ASCII str
 * of 26 characters; sequence an exact itertools.count; head, before and after bytes. body is the message's
 * own (bytes(body) is that object). */
static PyObject *py_plain_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "plain_single(message, transactional, head, now_ms, before, prefix, sequence, after, empty)");
        return NULL;
    }
    PyObject *m = args[0], *transactional = args[1], *head = args[2], *before = args[4], *prefix = args[5];
    PyObject *sequence = args[6], *after = args[7], *empty = args[8];
    int counted = load_count_type();
    if (counted < 0)
        return NULL;
    if (counted == 0 || message_type == NULL || Py_TYPE(m) != message_type || Py_TYPE(sequence) != count_type ||
        (transactional != Py_True && transactional != Py_False) || !PyBytes_CheckExact(head) ||
        !PyBytes_CheckExact(before) || !PyBytes_CheckExact(after) || !PyLong_CheckExact(args[3]) ||
        !PyUnicode_CheckExact(prefix) || !PyUnicode_IS_COMPACT_ASCII(prefix) ||
        PyUnicode_GET_LENGTH(prefix) != ID_PREFIX_CHARS)
        Py_RETURN_NONE;
    PyObject *body = plain_body(m, transactional, empty);
    if (body == NULL)
        Py_RETURN_NONE;
    int overflow = 0;
    long long now = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || now < 1000000000000LL || now > 9999999999999LL)
        Py_RETURN_NONE; /* str(now) is not 13 digits: head's length bytes do not fit it */
    Py_ssize_t head_len = PyBytes_GET_SIZE(head), before_len = PyBytes_GET_SIZE(before);
    Py_ssize_t after_len = PyBytes_GET_SIZE(after);
    if (head_len > PY_SSIZE_T_MAX / 4 || before_len > PY_SSIZE_T_MAX / 4 || after_len > PY_SSIZE_T_MAX / 4)
        Py_RETURN_NONE;
    PyObject *id = PyUnicode_New(ID_CHARS, 127);
    if (id == NULL)
        return NULL;
    char *text = (char *)PyUnicode_DATA(id);
    memcpy(text, PyUnicode_DATA(prefix), ID_PREFIX_CHARS);
    if (next_hex8(sequence, text + ID_PREFIX_CHARS) < 0) {
        Py_DECREF(id);
        return NULL;
    }
    PyObject *ext = PyBytes_FromStringAndSize(NULL, head_len + BORN_DIGITS + before_len + ID_CHARS + after_len);
    if (ext == NULL) {
        Py_DECREF(id);
        return NULL;
    }
    char *at = PyBytes_AS_STRING(ext);
    memcpy(at, PyBytes_AS_STRING(head), (size_t)head_len);
    at += head_len;
    for (int d = BORN_DIGITS - 1; d >= 0; d--) {
        at[d] = (char)('0' + now % 10);
        now /= 10;
    }
    at += BORN_DIGITS;
    memcpy(at, PyBytes_AS_STRING(before), (size_t)before_len);
    at += before_len;
    memcpy(at, text, ID_CHARS);
    at += ID_CHARS;
    memcpy(at, PyBytes_AS_STRING(after), (size_t)after_len);
    PyObject *made = PyTuple_New(3);
    if (made == NULL) {
        Py_DECREF(ext);
        Py_DECREF(id);
        return NULL;
    }
    Py_INCREF(body);
    PyTuple_SET_ITEM(made, 0, ext);
    PyTuple_SET_ITEM(made, 1, body);
    PyTuple_SET_ITEM(made, 2, id);
    return made;
}

static PyObject *py_plain_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "plain_batch(messages, prefix, sequence, id_tail, properties_max, empty)");
        return NULL;
    }
    PyObject *messages = args[0], *prefix = args[1], *sequence = args[2], *id_tail = args[3], *empty = args[5];
    Py_ssize_t properties_max = PyLong_AsSsize_t(args[4]);
    if (properties_max == -1 && PyErr_Occurred())
        return NULL;
    int counted = load_count_type();
    if (counted < 0)
        return NULL;
    if (counted == 0 || message_type == NULL || (!PyList_CheckExact(messages) && !PyTuple_CheckExact(messages)) ||
        !PyUnicode_CheckExact(prefix) || !PyUnicode_IS_COMPACT_ASCII(prefix) ||
        PyUnicode_GET_LENGTH(prefix) != ID_PREFIX_CHARS || !PyBytes_CheckExact(id_tail) ||
        Py_TYPE(sequence) != count_type)
        Py_RETURN_NONE; /* the sequence an exact itertools.count: taking a number runs no Python code */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(messages);
    PyObject **items = PySequence_Fast_ITEMS(messages);
    Py_ssize_t tail_len = PyBytes_GET_SIZE(id_tail);
    Py_ssize_t properties_len = UNIQ_PAIR_LEN + ID_CHARS + tail_len;
    if (count == 0 || properties_len > properties_max || properties_len > 0x7FFF)
        Py_RETURN_NONE;
    /* the check pass: nothing is taken from the sequence unless every message is plain */
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *m = items[i];
        if (Py_TYPE(m) != message_type)
            Py_RETURN_NONE;
        PyObject *body = plain_body(m, Py_False, empty);
        if (body == NULL)
            Py_RETURN_NONE;
        Py_ssize_t entry = 20 + PyBytes_GET_SIZE(body) + 2 + properties_len;
        if (entry > INT32_MAX || size > PY_SSIZE_T_MAX - entry)
            Py_RETURN_NONE;
        size += entry;
    }
    PyObject *ids = PyList_New(count);
    if (ids == NULL)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        Py_DECREF(ids);
        return NULL;
    }
    const char *head = (const char *)PyUnicode_DATA(prefix);
    const char *tail = PyBytes_AS_STRING(id_tail);
    char *at = PyBytes_AS_STRING(out), *end = at + size;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the allocations above may have run a collection (finalizers: Python code): the batch is read
         * again and every entry checked to fit, so a batch changed meanwhile is an error, never a
         * write past the buffer */
        PyObject *m = PySequence_Fast_GET_SIZE(messages) == count ? PySequence_Fast_ITEMS(messages)[i] : NULL;
        PyObject *body = m != NULL && Py_TYPE(m) == message_type ? slot(m, message_offsets[M_BODY]) : NULL;
        if (body == NULL || !PyBytes_CheckExact(body) ||
            end - at < 20 + PyBytes_GET_SIZE(body) + 2 + properties_len) {
            PyErr_SetString(PyExc_RuntimeError, "plain_batch: the batch changed while it was encoded");
            goto fail;
        }
        PyObject *next = PyIter_Next(sequence);
        if (next == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "plain_batch: the id sequence ended");
            goto fail;
        }
        unsigned long long number = PyLong_Check(next) ? PyLong_AsUnsignedLongLongMask(next) : (unsigned long long)-1;
        int bad = !PyLong_Check(next) || (number == (unsigned long long)-1 && PyErr_Occurred());
        Py_DECREF(next);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "plain_batch: the id sequence gave a non-int");
            goto fail;
        }
        uint32_t seq = (uint32_t)(number & 0xFFFFFFFFu);
        PyObject *id = PyUnicode_New(ID_CHARS, 127);
        if (id == NULL)
            goto fail;
        char *text = (char *)PyUnicode_DATA(id);
        memcpy(text, head, ID_PREFIX_CHARS);
        for (int d = 0; d < 8; d++)
            text[ID_PREFIX_CHARS + d] = HEX[(seq >> (28 - 4 * d)) & 0xF];
        PyList_SET_ITEM(ids, i, id);
        Py_ssize_t body_len = PyBytes_GET_SIZE(body);
        put_be32(at, (uint32_t)(20 + body_len + 2 + properties_len));
        memset(at + 4, 0, 12); /* magic, crc, flag */
        put_be32(at + 16, (uint32_t)body_len);
        at += 20;
        memcpy(at, PyBytes_AS_STRING(body), (size_t)body_len);
        at += body_len;
        at[0] = (char)(properties_len >> 8);
        at[1] = (char)properties_len;
        at += 2;
        memcpy(at, UNIQ_PAIR, UNIQ_PAIR_LEN);
        at += UNIQ_PAIR_LEN;
        memcpy(at, text, ID_CHARS);
        at += ID_CHARS;
        memcpy(at, tail, (size_t)tail_len);
        at += tail_len;
    }
    if (at != end) {
        PyErr_SetString(PyExc_RuntimeError, "plain_batch: the batch changed while it was encoded");
        goto fail;
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL)
        goto fail;
    PyTuple_SET_ITEM(pair, 0, out);
    PyTuple_SET_ITEM(pair, 1, ids);
    return pair;
fail:
    Py_DECREF(out);
    Py_DECREF(ids); /* its unset items are NULL, which list_dealloc skips */
    return NULL;
}

static PyObject *py_results(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "results(ids, queue, base, transaction_id, msg_id, recall_handle)");
        return NULL;
    }
    PyObject *ids = args[0], *queue = args[1], *base_obj = args[2], *tx_id = args[3], *msg_id = args[4];
    PyObject *recall = args[5];
    if (result_type == NULL || !PyList_CheckExact(ids) || !PyLong_CheckExact(base_obj) ||
        !PyUnicode_CheckExact(msg_id) || !PyUnicode_IS_COMPACT_ASCII(msg_id))
        Py_RETURN_NONE;
    int overflow = 0;
    long long base = PyLong_AsLongLongAndOverflow(base_obj, &overflow);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(ids);
    if (overflow || base > INT64_MAX - (long long)count)
        Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(msg_id);
    Py_ssize_t length = PyUnicode_GET_LENGTH(msg_id);
    PyObject *list = PyList_New(count);
    if (list == NULL)
        return NULL;
    Py_ssize_t at = 0; /* the start of the next offset id; > length once every one is taken */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *offset_id;
        if (at <= length) {
            const char *stop = memchr(text + at, ',', (size_t)(length - at));
            Py_ssize_t end = stop != NULL ? stop - text : length;
            offset_id = PyUnicode_FromStringAndSize(text + at, end - at); /* ASCII: one byte a char */
            if (offset_id == NULL)
                goto fail;
            at = end + 1;
        } else {
            offset_id = Py_NewRef(Py_None);
        }
        PyObject *position = PyLong_FromLongLong(base + (long long)i);
        if (position == NULL) {
            Py_DECREF(offset_id);
            goto fail;
        }
        PyObject *result = result_type->tp_alloc(result_type, 0);
        if (result == NULL) {
            Py_DECREF(offset_id);
            Py_DECREF(position);
            goto fail;
        }
        PyObject *values[N_FIELDS] = {
            Py_NewRef(PyList_GET_ITEM(ids, i)), Py_NewRef(queue), position, Py_NewRef(tx_id), offset_id,
            Py_NewRef(recall),
        };
        for (int f = 0; f < N_FIELDS; f++)
            *(PyObject **)((char *)result + offsets[f]) = values[f];
        PyList_SET_ITEM(list, i, result);
    }
    return list;
fail:
    Py_DECREF(list); /* its unset items are NULL, which list_dealloc skips */
    return NULL;
}

/* ------------------------------------------------------------------ a transaction's own two steps */

/* transactional_copy(message) -> Message | None
 *
 * What _transaction._transactional_py gives for an exact Message whose transactional slot is True or
 * False: the message itself when True; when False, a new Message (tp_alloc, as object.__new__) with every
 * slot the message's own object except transactional, which is True (what dataclasses.replace(message,
 * transactional=True) holds, without __init__). None for anything else (not exactly a Message, an empty
 * slot, a transactional value other than the two bools): the caller then runs the reference. */
static PyObject *py_transactional_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "transactional_copy(message)");
        return NULL;
    }
    PyObject *m = args[0];
    if (message_type == NULL || Py_TYPE(m) != message_type)
        Py_RETURN_NONE;
    PyObject *flag = slot(m, message_offsets[M_TRANSACTIONAL]);
    if (flag == Py_True)
        return Py_NewRef(m);
    if (flag != Py_False)
        Py_RETURN_NONE;
    for (int f = 0; f < N_MESSAGE_FIELDS; f++)
        if (slot(m, message_offsets[f]) == NULL)
            Py_RETURN_NONE;
    PyObject *copy = message_type->tp_alloc(message_type, 0);
    if (copy == NULL)
        return NULL;
    /* the allocation may have run a collection (finalizers: Python code), but m is held by the caller
     * and a frozen Message's slots are not reassigned by object.__setattr__; read them again anyway */
    for (int f = 0; f < N_MESSAGE_FIELDS; f++) {
        PyObject *value = f == M_TRANSACTIONAL ? Py_True : slot(m, message_offsets[f]);
        if (value == NULL) {
            Py_DECREF(copy);
            Py_RETURN_NONE;
        }
        *(PyObject **)((char *)copy + message_offsets[f]) = Py_NewRef(value);
    }
    return copy;
}

/* offset_id_offset(message_id) -> int | None
 *
 * msgid.offset_of_offset_message_id for an exact str (the reference): the commit-log offset, the low 64
 * bits of the 32 hex digits read as a signed int64, when message_id is exactly 32 ASCII hex digits
 * (either case); None for any other str. A value that is not an exact str is None too: the caller
 * gives the reference anything but an exact str. */
static PyObject *py_offset_id_offset(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "offset_id_offset(message_id)");
        return NULL;
    }
    PyObject *text = args[0];
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_COMPACT_ASCII(text) || PyUnicode_GET_LENGTH(text) != 32)
        Py_RETURN_NONE;
    const unsigned char *p = (const unsigned char *)PyUnicode_DATA(text);
    uint64_t value = 0;
    for (int i = 0; i < 32; i++) {
        unsigned c = p[i], digit;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (c >= 'a' && c <= 'f')
            digit = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            digit = c - 'A' + 10;
        else
            Py_RETURN_NONE;
        value = (value << 4) | digit; /* the high 64 bits shift out: only the low 64 are kept */
    }
    return PyLong_FromLongLong((long long)value);
}

/* the decimal digits of value into w (at least 20 bytes); their count */
static int put_decimal(char *w, long long value)
{
    char digits[24];
    int n = 0;
    unsigned long long x = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[n++] = (char)('0' + x % 10);
        x /= 10;
    } while (x != 0);
    int len = 0;
    if (value < 0)
        w[len++] = '-';
    while (n > 0)
        w[len++] = digits[--n];
    return len;
}

static const char END_TRAN_KEY[] = "tranStateTableOffset";
static const char END_LOG_KEY[] = "commitLogOffset";
#define END_TRAN_KEY_LEN ((Py_ssize_t)(sizeof(END_TRAN_KEY) - 1))
#define END_LOG_KEY_LEN ((Py_ssize_t)(sizeof(END_LOG_KEY) - 1))

/* end_binary(group_pair, queue_offset, log_offset, decision, msg_id, topic_pair, check, transaction_id)
 *     -> bytes | None
 *
 * END_TRANSACTION's extFields as _remoting._end_binary_py joins them (frame.binary_ext's layout, the
 * reference _end_binary_pairs): group_pair; the tranStateTableOffset pair of str(queue_offset); the
 * commitLogOffset pair of str(log_offset); decision (the commitOrRollback pair and the msgId key);
 * msg_id's int32 length and text; topic_pair; check (the fromTransactionCheck pair and the
 * transactionId key); transaction_id's int32 length and text. None unless group_pair, decision,
 * topic_pair and check are bytes, both offsets exact ints within int64 and both ids exact ASCII str:
 * the caller then runs the reference (which gives any error). */
static PyObject *py_end_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "end_binary(group_pair, queue_offset, log_offset, decision, msg_id, topic_pair, check, "
                        "transaction_id)");
        return NULL;
    }
    PyObject *group = args[0], *decision = args[3], *msg_id = args[4], *topic = args[5], *check = args[6];
    PyObject *tx_id = args[7];
    if (!PyBytes_CheckExact(group) || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2]) ||
        !PyBytes_CheckExact(decision) || !PyUnicode_CheckExact(msg_id) || !PyUnicode_IS_COMPACT_ASCII(msg_id) ||
        !PyBytes_CheckExact(topic) || !PyBytes_CheckExact(check) || !PyUnicode_CheckExact(tx_id) ||
        !PyUnicode_IS_COMPACT_ASCII(tx_id))
        Py_RETURN_NONE;
    long long numbers[2];
    for (int i = 0; i < 2; i++) {
        int overflow = 0;
        numbers[i] = PyLong_AsLongLongAndOverflow(args[1 + i], &overflow);
        if (numbers[i] == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)
            Py_RETURN_NONE;
    }
    char tran[24], log_offset[24];
    int tran_len = put_decimal(tran, numbers[0]);
    int log_len = put_decimal(log_offset, numbers[1]);
    Py_ssize_t group_len = PyBytes_GET_SIZE(group), decision_len = PyBytes_GET_SIZE(decision);
    Py_ssize_t topic_len = PyBytes_GET_SIZE(topic), check_len = PyBytes_GET_SIZE(check);
    Py_ssize_t id_len = PyUnicode_GET_LENGTH(msg_id), tx_len = PyUnicode_GET_LENGTH(tx_id);
    if (group_len > INT32_MAX || decision_len > INT32_MAX || topic_len > INT32_MAX || check_len > INT32_MAX ||
        id_len > INT32_MAX || tx_len > INT32_MAX)
        Py_RETURN_NONE;
    Py_ssize_t size = group_len + (2 + END_TRAN_KEY_LEN + 4 + tran_len) + (2 + END_LOG_KEY_LEN + 4 + log_len) +
                      decision_len + 4 + id_len + topic_len + check_len + 4 + tx_len;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    char *at = PyBytes_AS_STRING(out);
    memcpy(at, PyBytes_AS_STRING(group), (size_t)group_len);
    at += group_len;
    at[0] = 0;
    at[1] = (char)END_TRAN_KEY_LEN;
    memcpy(at + 2, END_TRAN_KEY, END_TRAN_KEY_LEN);
    at += 2 + END_TRAN_KEY_LEN;
    put_be32(at, (uint32_t)tran_len);
    memcpy(at + 4, tran, (size_t)tran_len);
    at += 4 + tran_len;
    at[0] = 0;
    at[1] = (char)END_LOG_KEY_LEN;
    memcpy(at + 2, END_LOG_KEY, END_LOG_KEY_LEN);
    at += 2 + END_LOG_KEY_LEN;
    put_be32(at, (uint32_t)log_len);
    memcpy(at + 4, log_offset, (size_t)log_len);
    at += 4 + log_len;
    memcpy(at, PyBytes_AS_STRING(decision), (size_t)decision_len);
    at += decision_len;
    put_be32(at, (uint32_t)id_len);
    memcpy(at + 4, PyUnicode_DATA(msg_id), (size_t)id_len);
    at += 4 + id_len;
    memcpy(at, PyBytes_AS_STRING(topic), (size_t)topic_len);
    at += topic_len;
    memcpy(at, PyBytes_AS_STRING(check), (size_t)check_len);
    at += check_len;
    put_be32(at, (uint32_t)tx_len);
    memcpy(at + 4, PyUnicode_DATA(tx_id), (size_t)tx_len);
    return out;
}

/* the slot offsets of a plain slotted class's fields, checked against names; -1 with TypeError */
static int slot_offsets(PyObject *cls, PyObject *fields, const char *const *names, int n, Py_ssize_t *found)
{
    if (!PyType_Check(cls) || !PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != n) {
        PyErr_SetString(PyExc_TypeError, "_batchsend.setup: not the class and its field names");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_itemsize != 0 || type->tp_dictoffset != 0 || type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "_batchsend.setup: the class is not a plain slotted class");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, names[i]) != 0) {
            PyErr_Format(PyExc_TypeError, "_batchsend.setup: field %d is not %s", i, names[i]);
            return -1;
        }
        PyObject *descr = PyDict_GetItemWithError(type->tp_dict, name);
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "_batchsend.setup: %s is not a slot", names[i]);
            return -1;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) || member->offset <= 0 ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "_batchsend.setup: %s is not an object slot", names[i]);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (found[j] == member->offset) {
                PyErr_Format(PyExc_TypeError, "_batchsend.setup: %s shares a slot", names[i]);
                return -1;
            }
        found[i] = member->offset;
    }
    return 0;
}

static PyObject *py_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "setup(result_cls, result_fields, message_cls, message_fields)");
        return NULL;
    }
    Py_ssize_t found[N_FIELDS], message_found[N_MESSAGE_FIELDS];
    if (slot_offsets(args[0], args[1], FIELDS, N_FIELDS, found) < 0 ||
        slot_offsets(args[2], args[3], MESSAGE_FIELDS, N_MESSAGE_FIELDS, message_found) < 0)
        return NULL;
    memcpy(offsets, found, sizeof(offsets));
    memcpy(message_offsets, message_found, sizeof(message_offsets));
    Py_INCREF(args[0]);
    Py_XSETREF(result_type, (PyTypeObject *)args[0]);
    Py_INCREF(args[2]);
    Py_XSETREF(message_type, (PyTypeObject *)args[2]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))py_setup, METH_FASTCALL, "Bind SendResult and Message (their slot offsets)."},
    {"results", (PyCFunction)(void (*)(void))py_results, METH_FASTCALL,
     "A batch's SendResults, or None when the reference must build them."},
    {"plain_total", (PyCFunction)(void (*)(void))py_plain_total, METH_FASTCALL,
     "The body bytes of a batch of plain messages of one topic, or -1."},
    {"plain_batch", (PyCFunction)(void (*)(void))py_plain_batch, METH_FASTCALL,
     "A plain batch's fresh ids and SEND_BATCH_MESSAGE body in one pass, or None."},
    {"plain_single", (PyCFunction)(void (*)(void))py_plain_single, METH_FASTCALL,
     "A plain message's SEND_MESSAGE_V2 binary extFields, body and fresh id in one call, or None."},
    {"transactional_copy", (PyCFunction)(void (*)(void))py_transactional_copy, METH_FASTCALL,
     "A Message as sent in a transaction (itself, or a copy flagged transactional), or None."},
    {"end_binary", (PyCFunction)(void (*)(void))py_end_binary, METH_FASTCALL,
     "END_TRANSACTION's binary extFields from the kept pairs, offsets and ids, or None."},
    {"offset_id_offset", (PyCFunction)(void (*)(void))py_offset_id_offset, METH_FASTCALL,
     "The commit-log offset of an offset message id (32 hex digits), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.client._batchsend", "The SDK batch send's per-message loops, in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__batchsend(void)
{
    return PyModule_Create(&module);
}
