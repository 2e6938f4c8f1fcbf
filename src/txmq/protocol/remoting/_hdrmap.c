/* txmq.protocol.remoting._hdrmap: a ROCKETMQ binary header's extFields map, in one C call.
 *
 *   binary_map(data, pos) -> dict[str, str] | None
 *
 * data (bytes) from pos to its end holds the pairs (int16 kLen, key, int32 vLen, value)*, big-endian,
 * as frame._binary_map reads them. The result is the dict that function returns (same pairs, same
 * order, a key named twice keeps its first place and its last value). Keys and values are UTF-8;
 * a string of ASCII bytes is copied straight into a new str. Common field names (the remoting
 * headers' keys) and a few common values are taken from a table of interned str objects built at
 * import, so they are neither allocated nor hashed per frame.
 *
 * None for anything wrong (a length out of bounds, a truncated pair, text that is not UTF-8, data
 * that is not bytes, a negative pos): the caller then runs frame._binary_map, the reference, which
 * gives the error.
 *
 *   bind_command(cls, descriptors) -> None;  command(code, opaque, ..., serialize_type) -> cls
 *
 * The decoded frame's RemotingCommand: command.py binds the class and its nine fields' slot
 * descriptors once (each checked to be a plain object slot of the class), then command() allocates
 * an instance as object.__new__ does and stores the nine values in their slots, what
 * command.new_command_py does through the descriptors' __set__ (nine Python-level calls).
 *
 *   send_answer(version, opaque, id_prefix, physical_offset, queue_id, queue_offset) -> bytes | None
 *
 * A single send's SUCCESS answer frame to a ROCKETMQ request (see py_send_answer), the reference
 * being frame.encode_send_response.
 *
 *   send_fields(ext, names, force_batch) -> (group, topic, queue_id, sys_flag, properties, batch) | None
 *
 * The six fields of a send header (see py_send_fields), the reference being send_header._fast.
 *
 *   binary_request(code, language, version, opaque, flag, ext, body, frame_max) -> bytes | None
 *
 * A ROCKETMQ request frame with no remark whose extFields are already rendered (see
 * py_binary_request), the reference being frame.encode_binary_request_py.
 *
 *   binary_frame(buf, pos, frame_max, languages, other, serialize_type) -> (command, end) | None
 *
 * A whole ROCKETMQ frame decoded from a bytes buffer (see py_binary_frame), the reference being
 * frame._decode_frame_bytes and _decode_binary.
 * Written for txmq; no code copied from elsewhere.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

/* The names of the remoting headers' fields (txmq.protocol.remoting.headers, the SEND_MESSAGE_V2
 * single letters are the one-character cache below) and a few values seen in every frame. */
static const char *const COMMON[] = {
    /* send (v1 names), its answer, END_TRANSACTION, CHECK_TRANSACTION_STATE */
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
    "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes", "brokerName", "msgId",
    "queueOffset", "transactionId", "tranStateTableOffset", "commitLogOffset", "commitOrRollback",
    "fromTransactionCheck", "offsetMsgId", "transactionState", "bname",
    /* pull, pop, ack, offsets, heartbeats, routes */
    "consumerGroup", "maxMsgNums", "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion",
    "expressionType", "expression", "maxMsgBytes", "invisibleTime", "pollTime", "bornTime", "initMode",
    "extraInfo", "offset", "nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId", "group",
    "clientId", "timestamp", "delayLevel", "originMsgId", "originTopic", "retryTopic",
    /* values */
    "true", "false", "TBW102",
};
#define N_COMMON ((int)(sizeof(COMMON) / sizeof(COMMON[0])))
#define MAX_LEN 32 /* longer strings are never in the table */

static PyObject *common[N_COMMON];
/* the table's strings by length: by_len[len_start[n] .. len_start[n + 1]) are those of n bytes */
static PyObject *by_len[N_COMMON];
static unsigned char len_start[MAX_LEN + 2];
static PyObject *one_char[128]; /* the one-character ASCII strings */

static PyObject *from_table(const unsigned char *p, Py_ssize_t n)
{
    if (n == 1)
        return p[0] < 128 ? one_char[p[0]] : NULL;
    if (n > MAX_LEN)
        return NULL;
    /* only the names of this length are compared (none for most values: an empty range) */
    for (int i = len_start[n]; i < len_start[n + 1]; i++)
        if (memcmp(PyUnicode_1BYTE_DATA(by_len[i]), p, (size_t)n) == 0)
            return by_len[i];
    return NULL;
}

/* A new reference to the str of n UTF-8 bytes at p, or NULL with an exception set. */
static PyObject *text(const unsigned char *p, Py_ssize_t n)
{
    PyObject *known = from_table(p, n);
    if (known != NULL) {
        Py_INCREF(known);
        return known;
    }
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) { /* eight bytes at a time: any high bit is not ASCII */
        uint64_t word;
        memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ULL)
            return PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    }
    for (; i < n; i++)
        if (p[i] >= 0x80)
            return PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL && n)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

/* The extFields pairs of d[pos:end] as a new dict (binary_map's and binary_frame's one reading); NULL
 * with no error set when they do not parse (or their text is not UTF-8), NULL with an error set when
 * out of memory. The pairs are counted and bounds-checked first, so the dict is made at its size and a
 * map that does not parse allocates nothing. */
static PyObject *map_range(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end)
{
    Py_ssize_t pairs = 0;
    for (Py_ssize_t at = pos; at < end; pairs++) {
        if (end - at < 2)
            return NULL;
        Py_ssize_t k = (Py_ssize_t)(int16_t)(((unsigned)d[at] << 8) | d[at + 1]);
        at += 2;
        if (k < 0 || k > end - at || end - at - k < 4)
            return NULL;
        at += k;
        Py_ssize_t v = (Py_ssize_t)(int32_t)(((uint32_t)d[at] << 24) | ((uint32_t)d[at + 1] << 16) |
                                             ((uint32_t)d[at + 2] << 8) | (uint32_t)d[at + 3]);
        at += 4;
        if (v < 0 || v > end - at)
            return NULL;
        at += v;
    }
#if PY_VERSION_HEX < 0x030D0000
    PyObject *result = pairs > 5 ? _PyDict_NewPresized(pairs) : PyDict_New();
#else
    PyObject *result = PyDict_New();
#endif
    if (result == NULL)
        return NULL;
    while (pos < end) { /* the bounds were checked above */
        Py_ssize_t key_size = (Py_ssize_t)(int16_t)(((unsigned)d[pos] << 8) | d[pos + 1]);
        Py_ssize_t key_start = pos + 2;
        pos = key_start + key_size;
        Py_ssize_t value_size = (Py_ssize_t)(int32_t)(((uint32_t)d[pos] << 24) | ((uint32_t)d[pos + 1] << 16) |
                                                      ((uint32_t)d[pos + 2] << 8) | (uint32_t)d[pos + 3]);
        pos += 4;
        PyObject *value = text(d + pos, value_size); /* the value first, as the reference decodes */
        PyObject *key = value == NULL ? NULL : text(d + key_start, key_size);
        if (key == NULL) {
            Py_XDECREF(value);
            Py_DECREF(result);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                PyErr_Clear();
            return NULL;
        }
        int rc = PyDict_SetItem(result, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0) {
            Py_DECREF(result);
            return NULL;
        }
        pos += value_size;
    }
    return result;
}

static PyObject *py_binary_map(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "binary_map(data, pos) takes 2 arguments");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyLong_CheckExact(args[1]))
        Py_RETURN_NONE;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (pos < 0)
        Py_RETURN_NONE;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t end = PyBytes_GET_SIZE(args[0]);
    PyObject *result = map_range(d, pos, end);
    if (result == NULL && !PyErr_Occurred())
        Py_RETURN_NONE; /* not a map, or not UTF-8: the reference decides */
    return result;
}

static PyObject *py_common_names(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *names = PyTuple_New(N_COMMON);
    if (names == NULL)
        return NULL;
    for (int i = 0; i < N_COMMON; i++) {
        Py_INCREF(common[i]);
        PyTuple_SET_ITEM(names, i, common[i]);
    }
    return names;
}

/* ------------------------------------------------------------------ the command object */

#define COMMAND_FIELDS 9
static PyTypeObject *command_type;           /* RemotingCommand, once bound */
static Py_ssize_t command_offset[COMMAND_FIELDS]; /* where each field's slot is in the object */

/* bind_command(cls, descriptors): cls's slot descriptors (its fields' member descriptors, in
 * field order) checked and their offsets kept, for command() */
static PyObject *py_bind_command(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) ||
        PyTuple_GET_SIZE(args[1]) != COMMAND_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "bind_command(cls, descriptors: tuple of 9 slot descriptors)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    if (cls->tp_dictoffset != 0 || cls->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "bind_command: the class must have slots only");
        return NULL;
    }
    Py_ssize_t offsets[COMMAND_FIELDS];
    for (int i = 0; i < COMMAND_FIELDS; i++) {
        PyObject *descr = PyTuple_GET_ITEM(args[1], i);
        if (Py_TYPE(descr) != &PyMemberDescr_Type || ((PyDescrObject *)descr)->d_type != cls) {
            PyErr_SetString(PyExc_TypeError, "bind_command: not a slot descriptor of the class");
            return NULL;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) || member->offset < (Py_ssize_t)sizeof(PyObject) ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
            PyErr_SetString(PyExc_TypeError, "bind_command: a slot that is not a plain object slot");
            return NULL;
        }
        offsets[i] = member->offset;
    }
    Py_INCREF(cls);
    Py_XSETREF(command_type, cls);
    memcpy(command_offset, offsets, sizeof offsets);
    Py_RETURN_NONE;
}

/* command(code, opaque, flag, remark, ext_fields, body, language, version, serialize_type): a new
 * instance of the bound class with its slots set to the arguments, as object.__new__(cls) and each
 * slot descriptor's __set__ make it (command.new_command_py); the values are stored as given */
static PyObject *py_command(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (command_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "command: bind_command was not called");
        return NULL;
    }
    if (nargs != COMMAND_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "command() takes the 9 fields");
        return NULL;
    }
    PyObject *obj = command_type->tp_alloc(command_type, 0);
    if (obj == NULL)
        return NULL;
    for (int i = 0; i < COMMAND_FIELDS; i++) {
        Py_INCREF(args[i]);
        *(PyObject **)((char *)obj + command_offset[i]) = args[i];
    }
    return obj;
}

/* ------------------------------------------------------------------ the send answer */

/* send_answer(version, opaque, id_prefix, physical_offset, queue_id, queue_offset) -> bytes | None
 *
 * The ROCKETMQ frame of a single send's SUCCESS answer (code 0, JAVA, flag 1, no remark, no body)
 * with the extFields msgId (id_prefix, then the physical offset as 16 upper-case hex digits: the
 * offset message id), queueId, queueOffset: what frame.encode_send_response(request, id_prefix +
 * send.hex16(physical_offset), queue_id, queue_offset) renders for a ROCKETMQ request, in one call.
 * None (the reference then renders it) for a version outside int16, an opaque outside int32, an
 * id_prefix that is not an ASCII str of under 112 characters, a physical offset outside [0, 2**63),
 * or a queue number that is not an int of 64 bits. */
static char *put_be(char *w, uint64_t value, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        *w++ = (char)(value >> (8 * i));
    return w;
}

/* value in decimal at w (str(value): a '-', then the digits), its length; w holds 20 bytes */
static int decimal(char *w, long long value)
{
    char digits[20];
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

static char *put_pair(char *w, const char *key, int key_len, const char *value, Py_ssize_t value_len)
{
    w = put_be(w, (uint64_t)key_len, 2);
    memcpy(w, key, (size_t)key_len);
    w += key_len;
    w = put_be(w, (uint64_t)value_len, 4);
    memcpy(w, value, (size_t)value_len);
    return w + value_len;
}

static PyObject *py_send_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "send_answer takes 6 arguments");
        return NULL;
    }
    PyObject *prefix = args[2];
    if (!PyLong_CheckExact(args[0]) || !PyLong_CheckExact(args[1]) || !PyUnicode_CheckExact(prefix) ||
        !PyUnicode_IS_ASCII(prefix) || PyUnicode_GET_LENGTH(prefix) >= 128 - 16 || !PyLong_CheckExact(args[3]) ||
        !PyLong_CheckExact(args[4]) || !PyLong_CheckExact(args[5]))
        Py_RETURN_NONE;
    long long numbers[5]; /* version, opaque, physical offset, queue id, queue offset */
    for (int i = 0; i < 5; i++) {
        int overflow = 0;
        numbers[i] = PyLong_AsLongLongAndOverflow(args[i < 2 ? i : i + 1], &overflow);
        if (numbers[i] == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)
            Py_RETURN_NONE;
    }
    long long version = numbers[0], opaque = numbers[1], physical = numbers[2];
    if (version < -0x8000 || version > 0x7FFF || opaque < INT32_MIN || opaque > INT32_MAX || physical < 0)
        Py_RETURN_NONE;
    char queue_text[24], offset_text[24];
    int queue_len = decimal(queue_text, numbers[3]);
    int offset_len = decimal(offset_text, numbers[4]);
    Py_ssize_t prefix_len = PyUnicode_GET_LENGTH(prefix);
    char msg_id[128];
    memcpy(msg_id, PyUnicode_1BYTE_DATA(prefix), (size_t)prefix_len);
    static const char HEX[] = "0123456789ABCDEF";
    for (int i = 0; i < 16; i++)
        msg_id[prefix_len + i] = HEX[((unsigned long long)physical >> (4 * (15 - i))) & 0xF];
    Py_ssize_t id_len = prefix_len + 16;
    Py_ssize_t ext_len = (2 + 5 + 4 + id_len) + (2 + 7 + 4 + queue_len) + (2 + 11 + 4 + offset_len);
    Py_ssize_t header_len = 13 + 8 + ext_len;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, 4 + 4 + header_len);
    if (frame == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(frame);
    w = put_be(w, (uint64_t)(4 + header_len), 4);
    w = put_be(w, (uint64_t)1 << 24 | (uint64_t)header_len, 4); /* ROCKETMQ, the header's length */
    w = put_be(w, 0, 2);                                        /* code: SUCCESS */
    *w++ = 0;                                                   /* language: JAVA */
    w = put_be(w, (uint64_t)version, 2);
    w = put_be(w, (uint64_t)opaque, 4);
    w = put_be(w, 1, 4); /* flag: a response */
    w = put_be(w, 0, 4); /* no remark */
    w = put_be(w, (uint64_t)ext_len, 4);
    w = put_pair(w, "msgId", 5, msg_id, id_len);
    w = put_pair(w, "queueId", 7, queue_text, queue_len);
    put_pair(w, "queueOffset", 11, offset_text, offset_len);
    return frame;
}

/* ------------------------------------------------------------------ the send header's fields */

/* send_fields(ext, names, force_batch) -> (producer_group, topic, queue_id, sys_flag, properties,
 * batch) | None
 *
 * The six fields send_header._fast reads from a send header's extFields (names: its 14 wire names,
 * in SendMessageRequestHeader's field order), with the same checks: group, topic and default topic
 * present; queue count, queue id, sys flag, born time and flag present and plain decimals (an
 * optional '-', then 1 to 18 ASCII digits), the reconsume times and max reconsume times too when
 * present; batch: force_batch, or the batch field "true" in any case. None wherever _fast gives None,
 * and also for a value read that is not an exact str, or a batch field that is not ASCII: the caller
 * then runs _fast (whose result, where this one is not None, is the same). */
static int plain_decimal(PyObject *value, long long *out)
{
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value))
        return 0;
    const unsigned char *p = PyUnicode_1BYTE_DATA(value);
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    int negative = n > 0 && p[0] == '-';
    if (negative)
        p++, n--;
    if (n < 1 || n > 18)
        return 0;
    long long x = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        x = x * 10 + (p[i] - '0');
    }
    *out = negative ? -x : x;
    return 1;
}

static PyObject *py_send_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "send_fields takes 3 arguments");
        return NULL;
    }
    PyObject *ext = args[0], *names = args[1];
    if (!PyDict_CheckExact(ext) || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 14)
        Py_RETURN_NONE;
    int force_batch = PyObject_IsTrue(args[2]);
    if (force_batch < 0)
        return NULL;
    PyObject *got[14];
    /* names of one ASCII character each (SEND_MESSAGE_V2's): the map read in one pass, each key of one
     * ASCII character placed by a table (a key equals a name exactly when it is that character);
     * other names (SEND_MESSAGE's) or any key that is not an exact str: looked up one by one */
    signed char slot[128];
    memset(slot, -1, sizeof slot);
    int one_pass = 1;
    for (int i = 0; i < 14 && one_pass; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(name) || !PyUnicode_IS_ASCII(name) || PyUnicode_GET_LENGTH(name) != 1 ||
            slot[PyUnicode_1BYTE_DATA(name)[0]] >= 0)
            one_pass = 0;
        else
            slot[PyUnicode_1BYTE_DATA(name)[0]] = (signed char)i;
    }
    if (one_pass) {
        for (int i = 0; i < 14; i++)
            got[i] = NULL;
        Py_ssize_t at = 0;
        PyObject *key, *value;
        while (PyDict_Next(ext, &at, &key, &value)) { /* borrowed */
            if (!PyUnicode_CheckExact(key)) {
                one_pass = 0;
                break;
            }
            if (PyUnicode_IS_ASCII(key) && PyUnicode_GET_LENGTH(key) == 1) {
                int i = slot[PyUnicode_1BYTE_DATA(key)[0]];
                if (i >= 0)
                    got[i] = value;
            }
        }
    }
    if (!one_pass) {
        for (int i = 0; i < 14; i++) {
            got[i] = PyDict_GetItemWithError(ext, PyTuple_GET_ITEM(names, i)); /* borrowed */
            if (got[i] == NULL && PyErr_Occurred())
                return NULL;
        }
    }
    PyObject *group = got[0], *topic = got[1], *properties = got[8];
    if (group == NULL || topic == NULL || got[2] == NULL || !PyUnicode_CheckExact(group) ||
        !PyUnicode_CheckExact(topic) || (properties != NULL && !PyUnicode_CheckExact(properties)))
        Py_RETURN_NONE;
    long long number[14];
    for (int i = 3; i <= 7; i++) /* queue count, queue id, sys flag, born time, flag */
        if (got[i] == NULL || !plain_decimal(got[i], &number[i]))
            Py_RETURN_NONE;
    if ((got[9] != NULL && !plain_decimal(got[9], &number[9])) ||
        (got[12] != NULL && !plain_decimal(got[12], &number[12])))
        Py_RETURN_NONE;
    int batch = force_batch;
    if (!batch && got[11] != NULL) {
        PyObject *raw = got[11];
        if (!PyUnicode_CheckExact(raw) || !PyUnicode_IS_ASCII(raw))
            Py_RETURN_NONE;
        const unsigned char *p = PyUnicode_1BYTE_DATA(raw);
        batch = PyUnicode_GET_LENGTH(raw) == 4 && (p[0] | 0x20) == 't' && (p[1] | 0x20) == 'r' &&
                (p[2] | 0x20) == 'u' && (p[3] | 0x20) == 'e';
    }
    PyObject *queue_id = PyLong_FromLongLong(number[4]), *sys_flag = PyLong_FromLongLong(number[5]);
    PyObject *result = NULL;
    if (queue_id != NULL && sys_flag != NULL)
        result = PyTuple_Pack(6, group, topic, queue_id, sys_flag, properties != NULL ? properties : Py_None,
                              batch ? Py_True : Py_False);
    Py_XDECREF(queue_id);
    Py_XDECREF(sys_flag);
    return result;
}

/* binary_request(code, language, version, opaque, flag, ext, body, frame_max): frame.encode_binary_request_py's
 * bytes (struct ">iIhbhiiii": length, serialize word | header length, code, language, version, opaque, flag,
 * remark length 0, ext length; then ext, then body) in one allocation. The ints are int objects (an IntEnum
 * language too), ext and body exactly bytes. None when a value does not fit its field, the frame is longer
 * than frame_max, or an argument is of another type: the reference then raises its error or renders it. */
static PyObject *py_binary_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "binary_request takes 8 arguments");
        return NULL;
    }
    PyObject *ext = args[5], *body = args[6];
    if (!PyBytes_CheckExact(ext) || !PyBytes_CheckExact(body))
        Py_RETURN_NONE;
    long long n[6]; /* code, language, version, opaque, flag, frame_max */
    for (int i = 0; i < 6; i++) {
        PyObject *value = args[i < 5 ? i : 7];
        if (!PyLong_Check(value))
            Py_RETURN_NONE;
        int overflow = 0;
        n[i] = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (n[i] == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)
            Py_RETURN_NONE;
    }
    if (n[0] < -0x8000 || n[0] > 0x7FFF || n[1] < -0x80 || n[1] > 0x7F || n[2] < -0x8000 || n[2] > 0x7FFF ||
        n[3] < INT32_MIN || n[3] > INT32_MAX || n[4] < INT32_MIN || n[4] > INT32_MAX)
        Py_RETURN_NONE;
    Py_ssize_t ext_len = PyBytes_GET_SIZE(ext), body_len = PyBytes_GET_SIZE(body);
    /* header length = 13 fixed bytes + remark length + ext length words + ext; frame = 4 + that + body */
    long long header_len = 13 + 8 + (long long)ext_len;
    long long length = 4 + header_len + (long long)body_len;
    if (length > n[5] || length > INT32_MAX || header_len > 0xFFFFFF)
        Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + length));
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    w = put_be(w, (uint64_t)length, 4);
    w = put_be(w, (1ULL << 24) | (uint64_t)header_len, 4);
    w = put_be(w, (uint64_t)n[0], 2);
    *w++ = (char)(n[1] & 0xFF);
    w = put_be(w, (uint64_t)n[2], 2);
    w = put_be(w, (uint64_t)n[3], 4);
    w = put_be(w, (uint64_t)n[4], 4);
    w = put_be(w, 0, 4);
    w = put_be(w, (uint64_t)ext_len, 4);
    memcpy(w, PyBytes_AS_STRING(ext), (size_t)ext_len);
    memcpy(w + ext_len, PyBytes_AS_STRING(body), (size_t)body_len);
    return out;
}

/* ------------------------------------------------------------------ a whole ROCKETMQ frame */

static inline int32_t be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int16_t be16(const unsigned char *p)
{
    return (int16_t)(((unsigned)p[0] << 8) | p[1]);
}

/* binary_frame(buf, pos, frame_max, languages, other, serialize_type) -> (command, end) | None
 *
 * What frame.decode_frame(buf, pos) gives for a whole, well-formed ROCKETMQ frame at buf[pos:] in a
 * bytes buf (frame._decode_frame_bytes, then _decode_binary): the command (the bound class, made as
 * command() makes it) with code, opaque, flag, the remark (None when empty), the extFields dict (as
 * binary_map reads it), the body (a copy of the frame's rest), languages.get(the signed language byte,
 * other), the version and serialize_type; and the frame's end. None for everything else: buf not
 * bytes, fewer than 8 bytes, a frame not yet whole, a JSON frame, any length out of its bounds, text
 * that is not UTF-8, no bound class: the reference then gives its answer (None for a frame not whole,
 * its error for a malformed one). */
static PyObject *py_binary_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "binary_frame(buf, pos, frame_max, languages, other, serialize_type)");
        return NULL;
    }
    PyObject *buf = args[0], *languages = args[3];
    if (command_type == NULL || !PyBytes_CheckExact(buf) || !PyLong_CheckExact(args[1]) ||
        !PyLong_CheckExact(args[2]) || !PyDict_CheckExact(languages))
        Py_RETURN_NONE;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    long long frame_max = PyLong_AsLongLong(args[2]);
    if ((pos == -1 || frame_max == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(buf);
    if (pos < 0 || pos > size || size - pos < 8)
        Py_RETURN_NONE;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(buf) + pos;
    long long length = be32(d);
    Py_ssize_t header_length = ((Py_ssize_t)d[5] << 16) | ((Py_ssize_t)d[6] << 8) | d[7];
    if (d[4] != 1 || length < 4 || length > frame_max || header_length > length - 4 || length > size - pos - 4)
        Py_RETURN_NONE; /* JSON, malformed or not whole: the reference's */
    const unsigned char *h = d + 8;
    if (header_length < 13 + 8)
        Py_RETURN_NONE;
    int32_t remark_size = be32(h + 13);
    Py_ssize_t at = 17;
    if (remark_size < 0 || at + remark_size > header_length)
        Py_RETURN_NONE;
    Py_ssize_t remark_start = at;
    at += remark_size;
    if (at + 4 > header_length)
        Py_RETURN_NONE;
    int32_t ext_size = be32(h + at);
    at += 4;
    if (ext_size < 0 || at + ext_size != header_length)
        Py_RETURN_NONE;
    PyObject *remark;
    if (remark_size) {
        remark = PyUnicode_DecodeUTF8((const char *)h + remark_start, remark_size, "strict");
        if (remark == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return NULL;
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    } else {
        remark = Py_NewRef(Py_None);
    }
    PyObject *ext = map_range(h, at, header_length);
    if (ext == NULL) {
        Py_DECREF(remark);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    int language = h[2] > 127 ? (int)h[2] - 256 : (int)h[2];
    PyObject *language_key = PyLong_FromLong(language);
    PyObject *lang = language_key == NULL ? NULL : PyDict_GetItemWithError(languages, language_key); /* borrowed */
    Py_XDECREF(language_key);
    if (lang == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(remark);
            Py_DECREF(ext);
            return NULL;
        }
        lang = args[4];
    }
    Py_ssize_t body_start = 8 + header_length, end = 4 + (Py_ssize_t)length;
    PyObject *values[COMMAND_FIELDS] = {
        PyLong_FromLong(be16(h)), PyLong_FromLong(be32(h + 5)), PyLong_FromLong(be32(h + 9)), remark, ext,
        PyBytes_FromStringAndSize((const char *)d + body_start, end - body_start), Py_NewRef(lang),
        PyLong_FromLong(be16(h + 3)), Py_NewRef(args[5]),
    };
    PyObject *end_obj = PyLong_FromSsize_t(pos + end);
    PyObject *cmd = NULL;
    int ok = end_obj != NULL;
    for (int i = 0; i < COMMAND_FIELDS; i++)
        ok = ok && values[i] != NULL;
    if (ok)
        cmd = command_type->tp_alloc(command_type, 0);
    PyObject *pair = cmd == NULL ? NULL : PyTuple_New(2);
    if (pair == NULL) {
        Py_XDECREF(cmd);
        Py_XDECREF(end_obj);
        for (int i = 0; i < COMMAND_FIELDS; i++)
            Py_XDECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < COMMAND_FIELDS; i++)
        *(PyObject **)((char *)cmd + command_offset[i]) = values[i]; /* the references taken above */
    PyTuple_SET_ITEM(pair, 0, cmd);
    PyTuple_SET_ITEM(pair, 1, end_obj);
    return pair;
}

static PyMethodDef methods[] = {
    {"binary_map", (PyCFunction)(void (*)(void))py_binary_map, METH_FASTCALL,
     "The extFields dict of a ROCKETMQ header from pos, or None when the reference must judge it."},
    {"common_names", py_common_names, METH_NOARGS, "The interned strings of the table."},
    {"bind_command", (PyCFunction)(void (*)(void))py_bind_command, METH_FASTCALL,
     "Keep the command class and its fields' slot offsets for command()."},
    {"command", (PyCFunction)(void (*)(void))py_command, METH_FASTCALL,
     "A command of the bound class with its nine fields set (command.new_command_py's object)."},
    {"send_answer", (PyCFunction)(void (*)(void))py_send_answer, METH_FASTCALL,
     "A single send's ROCKETMQ SUCCESS answer frame, or None when the reference must render it."},
    {"send_fields", (PyCFunction)(void (*)(void))py_send_fields, METH_FASTCALL,
     "A send header's six fields as send_header._fast reads them, or None when it must read them."},
    {"binary_request", (PyCFunction)(void (*)(void))py_binary_request, METH_FASTCALL,
     "A ROCKETMQ request frame with rendered extFields, or None when the reference must judge it."},
    {"binary_frame", (PyCFunction)(void (*)(void))py_binary_frame, METH_FASTCALL,
     "A whole ROCKETMQ frame's command and end from a bytes buffer, or None when the reference must judge it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.protocol.remoting._hdrmap", "A ROCKETMQ header's extFields map, in C.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hdrmap(void)
{
    if (common[0] == NULL) {
        for (int i = 0; i < N_COMMON; i++) {
            size_t len = strlen(COMMON[i]);
            if (len < 2 || len > MAX_LEN) {
                PyErr_SetString(PyExc_SystemError, "_hdrmap: a table name of a bad length");
                return NULL;
            }
            common[i] = PyUnicode_InternFromString(COMMON[i]);
            if (common[i] == NULL)
                return NULL;
            (void)PyObject_Hash(common[i]);
        }
        int placed = 0; /* by_len: the table sorted by length (a counting sort) */
        for (int n = 0; n <= MAX_LEN + 1; n++) {
            len_start[n] = (unsigned char)placed;
            for (int i = 0; i < N_COMMON && n <= MAX_LEN; i++)
                if (strlen(COMMON[i]) == (size_t)n)
                    by_len[placed++] = common[i];
        }
        for (int c = 0; c < 128; c++) {
            char ch = (char)c;
            one_char[c] = PyUnicode_FromStringAndSize(&ch, 1);
            if (one_char[c] == NULL)
                return NULL;
            (void)PyObject_Hash(one_char[c]);
        }
    }
    return PyModule_Create(&module);
}
