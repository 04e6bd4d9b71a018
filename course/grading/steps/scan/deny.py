"""The deny list: what no answer of this course needs, each entry with why.

One list for every rule of :mod:`course.grading.steps.scan`. It flags a submission for
the instructor and zeroes the tests after it; it is not the defence (the sandbox
and the verdicts decided in the grader's process are): a route it does not list
earns nothing either, because wrong evidence fails.
"""

from __future__ import annotations

#: Modules an answer may not import (the module and everything under it).
MODULES = {
    "builtins": "replaces the builtins the tests call",
    "importlib": "loads or reloads modules by a name built at run time",
    "ctypes": "writes process memory, under any object",
    "gc": "finds live objects (the checks, the evidence log) to change them",
    "inspect": "reads frames and the source of the grading tools",
    "types": "builds functions and modules from raw code objects",
    "marshal": "loads raw code objects",
    "pickle": "runs code while it loads",
    "dill": "runs code while it loads",
    "cloudpickle": "runs code while it loads",
    "code": "an interpreter inside the kernel",
    "codeop": "compiles code from strings",
    "runpy": "runs other files as code",
    "IPython": "the kernel's shell: error display, hooks, history",
    "ipykernel": "the kernel itself: its sockets and output",
    "traitlets": "the kernel's configuration objects",
    "nbgrader": "the grading tools themselves",
    "subprocess": "starts processes outside the notebook",
    "shutil": "copies and deletes files",
    "resource": "changes the kernel's limits",
    "threading": "code that keeps running after its cell",
}

#: Names of a module above that reach nothing: imported by name alone (``from types
#: import SimpleNamespace``, as HF's code does), each is a plain class.
PLAIN_NAMES = {"types": {"SimpleNamespace"}}

#: Builtins called by name that run or reach code dynamically.
CALLS = {
    "exec": "runs code from a string",
    "eval": "runs code from a string",
    "compile": "builds code from a string",
    "__import__": "imports a module by a name built at run time",
    "setattr": "changes an attribute by a name built at run time",
    "delattr": "deletes an attribute by a name built at run time",
    "globals": "the notebook's namespace, the tests' names included",
    "vars": "any object's namespace, a module's included",
    "get_ipython": "the kernel's shell",
    "breakpoint": "stops the kernel in a debugger",
    "open": "writes files (reading one is allowed)",
}

#: Names that reach the interpreter however they are used.
NAMES = {
    "get_ipython": "the kernel's shell",
    "__builtins__": "the builtins the tests call",
    "__import__": "imports a module by a name built at run time",
    "__loader__": "the module loader",
}

#: Attributes of interpreter hooks, frames and files.
ATTRS = {
    **dict.fromkeys(
        ["settrace", "setprofile", "addaudithook"], "runs code on every call"
    ),
    **dict.fromkeys(["excepthook", "displayhook"], "silences errors or output"),
    **dict.fromkeys(["modules", "meta_path", "path_hooks"], "swaps loaded modules"),
    **dict.fromkeys(["system", "popen"], "starts processes"),
    **dict.fromkeys(
        ["_getframe", "f_globals", "f_locals", "f_back", "f_builtins"],
        "reads or writes the caller's variables (the checks')",
    ),
    **dict.fromkeys(["tb_frame", "gi_frame", "cr_frame"], "reaches a frame"),
    **dict.fromkeys(
        ["write_text", "write_bytes", "remove", "unlink", "rmdir", "chmod"],
        "writes or deletes files",
    ),
}

#: Dunder attributes an answer may use; any other reaches an object's internals.
DUNDERS_OK = {"__init__", "__name__", "__call__", "__len__", "__repr__"}
DUNDERS_OK |= {"__class__"}  # as type(x) is; storing through it is still flagged

#: Special methods that let an object lie to the comparisons, when an answer
#: defines them (its own ``__eq__``, ``__bool__``, a tensor subclass' dispatch).
LYING = {"__torch_function__", "__torch_dispatch__", "__array_function__"}
LYING |= {"__array_ufunc__", "__instancecheck__", "__subclasscheck__", "__eq__"}
LYING |= {"__ne__", "__bool__", "__float__", "__int__", "__index__", "__getattr__"}
LYING |= {"__getattribute__"}

#: Bases an answer may not subclass (a subclass can lie to the comparisons).
LYING_BASES = r"\b(Tensor|ndarray|Parameter)$"

#: Roots of private names (``torch._C``, ``course.checks.calls._run``).
PRIVATE_ROOTS = {"torch", "numpy", "course"}

#: Attribute stores on imported names that are harmless: plot style, cuDNN flags.
HARMLESS = [r"\brcParams\b", r"^torch\.backends\."]

#: Builtins an answer may use by name; any other builtin is flagged.
BUILTINS = {"abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate"}
BUILTINS |= {"filter", "float", "format", "frozenset", "getattr", "hasattr", "int"}
BUILTINS |= {"isinstance", "issubclass", "iter", "len", "list", "map", "max", "min"}
BUILTINS |= {"next", "object", "pow", "print", "property", "range", "repr", "reversed"}
BUILTINS |= {"round", "set", "slice", "sorted", "str", "sum", "super", "tuple", "type"}
BUILTINS |= {"zip", "staticmethod", "classmethod", "NotImplemented", "Ellipsis"}
BUILTINS |= {"True", "False", "None"}
BUILTINS |= {"id", "hash", "ord", "chr", "complex", "bin", "hex", "oct"}  # plain values

#: IPython magics that change nothing (plot backend, print precision, help).
MAGICS_OK = {"matplotlib", "precision", "who", "whos", "pinfo", "pinfo2"}
#: Magics whose argument is Python code: the code is read like the cell.
CODE_MAGICS = {"time", "timeit", "capture"}
