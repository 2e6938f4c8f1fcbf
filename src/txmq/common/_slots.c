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

/* ---- Init: a slot_init class's __init__ in C ----------------------------------------------------------
 *
 *   initializer(cls, names, specs, reference, marker) -> Init
 *
 * Init, set as cls.__init__ by common/fastinit.slot_init, does what ``reference`` (the Python
 * __init__ slot_init generates, the reference: tests/property/test_slots_init.py) does for a call it
 * understands: its arguments bound to the fields by position and by name, a missing field's default
 * taken or its default factory called (also when the argument is ``marker``, slot_init's "no argument"
 * mark), a coerced field's value converted when it is not exactly of its type, and each value stored
 * in its slot, field by field in order (a factory or converter that raises leaves the fields before
 * it stored, as the reference does). Any other call (more positional arguments than fields, an
 * unknown, repeated or positional-and-named argument, a missing required one, ``self`` not an
 * instance of cls) calls the reference with the same arguments, which raises its own error. specs:
 * per field (kind, value, coerce type or None, converter or None), kind 0 required, 1 a default
 * (value), 2 a default factory (value). Init is a method descriptor like a function: cls.__init__ is
 * the Init, instance.__init__ a bound method; __wrapped__ is the reference (inspect.signature).
 */
#define INIT_FIELDS_MAX 64
enum { KIND_REQUIRED, KIND_DEFAULT, KIND_FACTORY };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *type;
    Py_ssize_t count;
    Py_ssize_t offsets[INIT_FIELDS_MAX];
    int kinds[INIT_FIELDS_MAX];
    PyObject *values[INIT_FIELDS_MAX];      /* the default, or the factory; NULL when required */
    PyObject *coerce_types[INIT_FIELDS_MAX]; /* NULL: not coerced */
    PyObject *converters[INIT_FIELDS_MAX];
    PyObject *names;     /* tuple of str */
    PyObject *reference; /* the Python __init__ */
    PyObject *marker;
    PyObject *dict; /* __doc__, __qualname__... as set from Python */
} Init;

static PyObject *init_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Init *self = (Init *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t count = self->count;
    PyObject *given[INIT_FIELDS_MAX];
    if (self->type == NULL || self->reference == NULL) { /* cleared (a collected cycle) */
        PyErr_SetString(PyExc_TypeError, "_slots.Init: cleared");
        return NULL;
    }
    if (nargs < 1 || nargs - 1 > count || !PyObject_TypeCheck(args[0], self->type))
        goto reference;
    PyObject *obj = args[0];
    Py_ssize_t positional = nargs - 1;
    for (Py_ssize_t i = 0; i < count; i++)
        given[i] = i < positional ? args[1 + i] : NULL;
    Py_ssize_t named = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject **names = &PyTuple_GET_ITEM(self->names, 0);
    for (Py_ssize_t k = 0; k < named; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = -1;
        for (Py_ssize_t i = positional; i < count; i++)
            if (names[i] == key) {
                at = i;
                break;
            }
        if (at < 0 && PyUnicode_CheckExact(key)) /* an equal name that is another object */
            for (Py_ssize_t i = positional; i < count; i++)
                if (PyUnicode_Compare(names[i], key) == 0) {
                    at = i;
                    break;
                }
        if (at < 0 || given[at] != NULL) /* unknown, given by position, or repeated: the reference's error */
            goto reference;
        given[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (given[i] == NULL && self->kinds[i] == KIND_REQUIRED)
            goto reference;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = given[i];
        if (value == NULL && self->kinds[i] == KIND_DEFAULT) {
            value = Py_NewRef(self->values[i]);
        } else if (self->kinds[i] == KIND_FACTORY && (value == NULL || value == self->marker)) {
            value = PyObject_CallNoArgs(self->values[i]);
            if (value == NULL)
                return NULL;
        } else {
            Py_INCREF(value);
        }
        if (self->coerce_types[i] != NULL && (PyObject *)Py_TYPE(value) != self->coerce_types[i]) {
            PyObject *converted = PyObject_CallOneArg(self->converters[i], value);
            Py_DECREF(value);
            if (converted == NULL)
                return NULL;
            value = converted;
        }
        PyObject **at = (PyObject **)((char *)obj + self->offsets[i]);
        PyObject *old = *at;
        *at = value;
        Py_XDECREF(old);
    }
    Py_RETURN_NONE;
reference:
    return PyObject_Vectorcall(self->reference, args, nargsf, kwnames);
}

static int init_traverse(PyObject *op, visitproc visit, void *arg)
{
    Init *self = (Init *)op;
    Py_VISIT(self->type);
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_VISIT(self->values[i]);
        Py_VISIT(self->coerce_types[i]);
        Py_VISIT(self->converters[i]);
    }
    Py_VISIT(self->names);
    Py_VISIT(self->reference);
    Py_VISIT(self->marker);
    Py_VISIT(self->dict);
    return 0;
}

static int init_clear(PyObject *op)
{
    Init *self = (Init *)op;
    Py_CLEAR(self->type);
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_CLEAR(self->values[i]);
        Py_CLEAR(self->coerce_types[i]);
        Py_CLEAR(self->converters[i]);
    }
    self->count = 0; /* a call after a clear goes to the reference (which is cleared too: an error) */
    Py_CLEAR(self->names);
    Py_CLEAR(self->reference);
    Py_CLEAR(self->marker);
    Py_CLEAR(self->dict);
    return 0;
}

static void init_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    init_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *init_descr_get(PyObject *op, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(op);
    return PyMethod_New(op, obj);
}

static PyObject *init_repr(PyObject *op)
{
    Init *self = (Init *)op;
    return PyUnicode_FromFormat("<slots __init__ of %s>", self->type != NULL ? self->type->tp_name : "?");
}

static PyObject *init_get_wrapped(PyObject *op, void *closure)
{
    (void)closure;
    Init *self = (Init *)op;
    if (self->reference == NULL) {
        PyErr_SetString(PyExc_AttributeError, "__wrapped__");
        return NULL;
    }
    return Py_NewRef(self->reference);
}

static PyGetSetDef init_getset[] = {
    {"__wrapped__", init_get_wrapped, NULL, "The reference: slot_init's Python __init__.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *init_call_reference(Init *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call((PyObject *)self, args, kwargs);
}

static PyTypeObject InitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txmq.common._slots.Init",
    .tp_basicsize = sizeof(Init),
    .tp_dealloc = init_dealloc,
    .tp_vectorcall_offset = offsetof(Init, vectorcall),
    .tp_repr = init_repr,
    .tp_call = (ternaryfunc)init_call_reference,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A slot_init class's __init__: its fields bound and stored in C, else its Python reference.",
    .tp_traverse = init_traverse,
    .tp_clear = init_clear,
    .tp_getset = init_getset,
    .tp_descr_get = init_descr_get,
    .tp_dictoffset = offsetof(Init, dict),
};

/* the offset of cls's writable object slot ``name`` (its own member descriptor), or -1 with TypeError */
static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_slots: a slot name that is not str");
        return -1;
    }
    PyObject *descr = PyDict_GetItemWithError(type->tp_dict, name); /* borrowed */
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "_slots: %s.%U is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (((PyDescrObject *)descr)->d_type != type || member->type != SLOT_OBJECT_EX ||
        (member->flags & SLOT_READONLY) || member->offset < (Py_ssize_t)sizeof(PyObject) ||
        member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "_slots: %s.%U is not a writable object slot", type->tp_name, name);
        return -1;
    }
    return member->offset;
}

static PyObject *py_initializer(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2]) || !PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "initializer(cls, names, specs, reference, marker)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *names = args[1], *specs = args[2];
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (count > INIT_FIELDS_MAX || type->tp_dict == NULL) {
        PyErr_Format(PyExc_TypeError, "_slots.initializer: %s has too many fields", type->tp_name);
        return NULL;
    }
    Init *self = PyObject_GC_New(Init, &InitType);
    if (self == NULL)
        return NULL;
    self->vectorcall = init_vectorcall;
    self->count = 0;
    self->type = (PyTypeObject *)Py_NewRef(type);
    self->names = NULL;
    self->reference = Py_NewRef(args[3]);
    self->marker = Py_NewRef(args[4]);
    self->dict = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i), *spec = PyTuple_GET_ITEM(specs, i);
        if (!PyUnicode_CheckExact(name) || !PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 4) {
            PyErr_SetString(PyExc_TypeError, "_slots.initializer: a field name or spec of another shape");
            goto fail;
        }
        Py_ssize_t offset = slot_offset(type, name);
        if (offset < 0)
            goto fail;
        for (Py_ssize_t j = 0; j < i; j++)
            if (self->offsets[j] == offset || PyUnicode_Compare(PyTuple_GET_ITEM(names, j), name) == 0) {
                PyErr_Format(PyExc_TypeError, "_slots.initializer: slot %U named twice", name);
                goto fail;
            }
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
        if (kind == -1 && PyErr_Occurred())
            goto fail;
        PyObject *value = PyTuple_GET_ITEM(spec, 1), *ctype = PyTuple_GET_ITEM(spec, 2);
        PyObject *converter = PyTuple_GET_ITEM(spec, 3);
        if ((kind != KIND_REQUIRED && kind != KIND_DEFAULT && kind != KIND_FACTORY) ||
            (kind == KIND_FACTORY && !PyCallable_Check(value)) ||
            (ctype != Py_None && (!PyType_Check(ctype) || !PyCallable_Check(converter)))) {
            PyErr_SetString(PyExc_TypeError, "_slots.initializer: a field spec it does not know");
            goto fail;
        }
        self->offsets[i] = offset;
        self->kinds[i] = (int)kind;
        self->values[i] = kind == KIND_REQUIRED ? NULL : Py_NewRef(value);
        self->coerce_types[i] = ctype == Py_None ? NULL : Py_NewRef(ctype);
        self->converters[i] = ctype == Py_None ? NULL : Py_NewRef(converter);
        self->count = i + 1;
    }
    /* interned names: a call's keyword names are found by identity (else by value) */
    self->names = PyTuple_New(count);
    if (self->names == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *name = Py_NewRef(PyTuple_GET_ITEM(names, i));
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(self->names, i, name);
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
fail:
    PyObject_GC_Track(self);
    Py_DECREF(self);
    return NULL;
}

/* ---- TupleMaker: a NamedTuple made from its values ---------------------------------------------------- */
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
    {"initializer", (PyCFunction)(void (*)(void))py_initializer, METH_FASTCALL,
     "initializer(cls, names, specs, reference, marker): a slot_init class's __init__ in C."},
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
    if (PyType_Ready(&MakerType) < 0 || PyType_Ready(&InitType) < 0 ||
        PyType_Ready(&TupleMakerType) < 0)
        return NULL;
    return PyModule_Create(&module);
}
