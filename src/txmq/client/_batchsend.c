/* txmq.client._batchsend: the per-message loops of the SDK's batch send, in C.
 *
 *   setup(result_cls, result_fields, message_cls, message_fields) -> None
 *   results(ids, queue, base, transaction_id, msg_id, recall_handle) -> list[SendResult] | None
 *   plain_total(messages, topic, body_max) -> int
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
