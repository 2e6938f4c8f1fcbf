/* txmq.common._slots: make an instance of a slotted class with its slots set, in one C call.
 *
 *   maker(cls, names) -> Maker
 *   Maker(*values) -> cls instance
 *   tuple_maker(cls, count) -> TupleMaker
 *   TupleMaker(*values) -> cls instance (a tuple subclass: a NamedTuple)
 *
 * Maker(v0, v1, ...) gives what the reference (common/fastinit.slot_maker_py) gives:
 * object.__new__(cls), then cls.__dict__[names[i]].__set__(obj, values[i]) for each i, in order. No
 * __init__ or __post_init__ runs, exactly as in the reference. The per-field member descriptor call
 * of the reference (a method-wrapper call with an argument tuple, ~460 instructions a field) becomes
 * one reference store per field.
 *
 * maker() checks once what makes the two the same: cls is a type allocated by object.__new__ (its
 * tp_new is object's, not abstract, no variable-size items), every name is a distinct writable
 * object slot (a member descriptor of type T_OBJECT_EX in the class's own __dict__, inside the
 * instance). Anything else is a TypeError at maker() time: the caller then keeps the reference.
 * A call with another number of values, or with keywords, is a TypeError and makes nothing.
 * A new instance's slots are empty (tp_alloc zeroes it), so each store takes a new reference and
 * drops none, as PyMember_SetOne does on an empty slot.
 *
 * TupleMaker(v0, v1, ...) gives what the reference (common/fastinit.tuple_maker_py) gives:
 * tuple.__new__(cls, (v0, v1, ...)) for a tuple subclass cls, without the class's own __new__ (a
 * NamedTuple's is interpreted Python) and without the argument tuple tuple.__new__ copies: the
 * instance is allocated by cls's tp_alloc with count items, each item a new reference to its value,
 * and GC-tracked as tuple.__new__ leaves it. A call with another number of values, or with
 * keywords, is a TypeError and makes nothing. Written for txmq; no code copied.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

#if PY_VERSION_HEX >= 0x030C0000
#define SLOT_OBJECT_EX Py_T_OBJECT_EX
#define SLOT_READONLY Py_READONLY
#else
#define SLOT_OBJECT_EX T_OBJECT_EX
#define SLOT_READONLY READONLY
#endif

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *type;
    Py_ssize_t count;
    Py_ssize_t *offsets;
} Maker;

static PyObject *maker_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Maker *self = (Maker *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_Format(PyExc_TypeError, "%s maker takes no keyword arguments", self->type->tp_name);
        return NULL;
    }
    if (nargs != self->count) {
        PyErr_Format(PyExc_TypeError, "%s maker takes %zd values, %zd given", self->type->tp_name,
                     self->count, nargs);
        return NULL;
    }
    PyObject *obj = self->type->tp_alloc(self->type, 0);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *value = args[i];
        Py_INCREF(value);
        *(PyObject **)((char *)obj + self->offsets[i]) = value;
    }
    return obj;
}

static void maker_dealloc(PyObject *op)
{
    Maker *self = (Maker *)op;
    Py_XDECREF(self->type);
    PyMem_Free(self->offsets);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *maker_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<slots maker of %s, %zd fields>", ((Maker *)op)->type->tp_name,
                                ((Maker *)op)->count);
}

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txmq.common._slots.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_dealloc = maker_dealloc,
    .tp_vectorcall_offset = offsetof(Maker, vectorcall),
    .tp_repr = maker_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Makes an instance of one slotted class with its slots set from the arguments, in order.",
};

static PyObject *py_maker(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "maker(cls, names): a class and a tuple of slot names");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *names = args[1];
    if (type->tp_new != PyBaseObject_Type.tp_new || type->tp_alloc == NULL || type->tp_itemsize != 0 ||
        (type->tp_flags & Py_TPFLAGS_IS_ABSTRACT) || type->tp_dict == NULL) {
        PyErr_Format(PyExc_TypeError, "_slots.maker: %s is not made by object.__new__", type->tp_name);
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    Py_ssize_t *offsets = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(count > 0 ? count : 1));
    if (offsets == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "_slots.maker: a slot name that is not str");
            goto fail;
        }
        PyObject *descr = PyDict_GetItemWithError(type->tp_dict, name); /* borrowed */
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "_slots.maker: %s.%U is not a slot", type->tp_name, name);
            goto fail;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (((PyDescrObject *)descr)->d_type != type || member->type != SLOT_OBJECT_EX ||
            (member->flags & SLOT_READONLY) || member->offset < (Py_ssize_t)sizeof(PyObject) ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "_slots.maker: %s.%U is not a writable object slot", type->tp_name,
                         name);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (offsets[j] == member->offset) {
                PyErr_Format(PyExc_TypeError, "_slots.maker: slot %U named twice", name);
                goto fail;
            }
        }
        offsets[i] = member->offset;
    }
    Maker *self = PyObject_New(Maker, &MakerType);
    if (self == NULL)
        goto fail;
    self->vectorcall = maker_vectorcall;
    Py_INCREF(type);
    self->type = type;
    self->count = count;
    self->offsets = offsets;
    return (PyObject *)self;
fail:
    PyMem_Free(offsets);
    return NULL;
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *type;
    Py_ssize_t count;
} TupleMaker;

static PyObject *tuple_maker_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                        PyObject *kwnames)
{
    TupleMaker *self = (TupleMaker *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_Format(PyExc_TypeError, "%s maker takes no keyword arguments", self->type->tp_name);
        return NULL;
    }
    if (nargs != self->count) {
        PyErr_Format(PyExc_TypeError, "%s maker takes %zd values, %zd given", self->type->tp_name,
                     self->count, nargs);
        return NULL;
    }
    PyObject *obj = self->type->tp_alloc(self->type, nargs);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *value = args[i];
        Py_INCREF(value);
        PyTuple_SET_ITEM(obj, i, value);
    }
    if (!PyObject_GC_IsTracked(obj))
        PyObject_GC_Track(obj);
    return obj;
}

static void tuple_maker_dealloc(PyObject *op)
{
    Py_XDECREF(((TupleMaker *)op)->type);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *tuple_maker_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<tuple maker of %s, %zd items>", ((TupleMaker *)op)->type->tp_name,
                                ((TupleMaker *)op)->count);
}

static PyTypeObject TupleMakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txmq.common._slots.TupleMaker",
    .tp_basicsize = sizeof(TupleMaker),
    .tp_dealloc = tuple_maker_dealloc,
    .tp_vectorcall_offset = offsetof(TupleMaker, vectorcall),
    .tp_repr = tuple_maker_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Makes an instance of one tuple subclass from the arguments, as tuple.__new__(cls, args).",
};

static PyObject *py_tuple_maker(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "tuple_maker(cls, count): a class and an int");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    /* what tuple.__new__(cls, ...) takes and makes: a GC tuple subtype, items allocated by tp_alloc */
    if (type == &PyTuple_Type || !PyType_IsSubtype(type, &PyTuple_Type) || type->tp_alloc == NULL ||
        !PyType_IS_GC(type) || type->tp_itemsize != PyTuple_Type.tp_itemsize || count < 0 ||
        (type->tp_flags & Py_TPFLAGS_IS_ABSTRACT)) {
        PyErr_Format(PyExc_TypeError, "_slots.tuple_maker: %s is not a tuple subclass it can make",
                     type->tp_name);
        return NULL;
    }
    TupleMaker *self = PyObject_New(TupleMaker, &TupleMakerType);
    if (self == NULL)
        return NULL;
    self->vectorcall = tuple_maker_vectorcall;
    Py_INCREF(type);
    self->type = type;
    self->count = count;
    return (PyObject *)self;
}

static PyMethodDef methods[] = {
    {"maker", (PyCFunction)(void (*)(void))py_maker, METH_FASTCALL,
     "maker(cls, names): a callable making cls instances with the named slots set from its arguments."},
    {"tuple_maker", (PyCFunction)(void (*)(void))py_tuple_maker, METH_FASTCALL,
     "tuple_maker(cls, count): a callable making cls (a tuple subclass) instances of its count arguments."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "txmq.common._slots", "Slotted instances made with their slots set, in C.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__slots(void)
{
    if (PyType_Ready(&MakerType) < 0 || PyType_Ready(&TupleMakerType) < 0)
        return NULL;
    return PyModule_Create(&module);
}
