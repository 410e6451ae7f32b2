// sabre._sabre: the extension module behind the Python package (python/sabre/__init__.py).
// sabre's errors become one Python hierarchy under sabre.Error that carries sabre's message; the
// classes by runtime status code mirror include/sabre/sabre.h.
// Tests: tests/python/test_api.py
#include <filesystem>
#include <new>
#include <stdexcept>

#include "codegen/lower.h"
#include "ext.h"
#include "frontend/onnx/importer.h"
#include "sabre/session.h"

namespace sabre::python {

namespace {

struct ErrorClasses {
  py::object base, invalid_argument, artifact, no_device, wrong_arch, cuda, internal, model, unsupported, compile;
};

ErrorClasses& classes() {
  static ErrorClasses* c = new ErrorClasses();  // lives as long as the interpreter
  return *c;
}

py::object make_class(py::module_& m, const char* name, py::handle bases, const char* doc) {
  std::string qualified = std::string("sabre.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!t) throw py::error_already_set();
  py::object cls = py::reinterpret_steal<py::object>(t);
  m.attr(name) = cls;
  return cls;
}

[[noreturn]] void raise(const py::object& cls, const std::string& msg) {
  PyErr_SetString(cls.ptr(), msg.c_str());
  throw py::error_already_set();
}

const py::object& class_of(sabre_rt_status code) {
  ErrorClasses& c = classes();
  switch (code) {
    case SABRE_ERR_INVALID_ARGUMENT: return c.invalid_argument;
    case SABRE_ERR_ARTIFACT: return c.artifact;
    case SABRE_ERR_NO_DEVICE: return c.no_device;
    case SABRE_ERR_WRONG_ARCH: return c.wrong_arch;
    case SABRE_ERR_CUDA: return c.cuda;
    case SABRE_SUCCESS:
    case SABRE_ERR_INTERNAL: break;
  }
  return c.internal;
}

}  // namespace

void register_errors(py::module_& m) {
  ErrorClasses& c = classes();
  c.base = make_class(m, "Error", PyExc_Exception, "Every error sabre raises; str(e) is sabre's message.");
  auto sub = [&](const char* name, std::initializer_list<PyObject*> also, const char* doc) {
    py::tuple bases(1 + also.size());
    bases[0] = c.base;
    size_t i = 1;
    for (PyObject* b : also) bases[i++] = py::handle(b);
    return make_class(m, name, bases, doc);
  };
  c.invalid_argument = sub("InvalidArgumentError", {PyExc_ValueError},
                           "A bad argument: an option, an input's dtype, shape or device, a dim outside its compiled range.");
  c.artifact = sub("ArtifactError", {}, "A missing or corrupt artifact, or one of another format version.");
  c.no_device = sub("NoDeviceError", {}, "No CUDA device (or driver), or a sabre built without CUDA.");
  c.wrong_arch = sub("WrongArchError", {}, "The GPU is not the one the artifact was compiled for.");
  c.cuda = sub("CudaError", {}, "A CUDA call or a kernel failed.");
  c.internal = sub("InternalError", {}, "A broken invariant inside sabre: a bug, please report it.");
  c.model = sub("ModelError", {}, "The model file cannot be read or is not a well-formed ONNX model.");
  c.unsupported = sub("UnsupportedError", {}, "Valid ONNX that sabre cannot compile (an op, attribute or dtype).");
  c.compile = sub("CompileError", {}, "Compiling failed (a kernel did not build: the message names it and its log).");

  // Exceptions that reach Python without translate() around them (none should) still get a class.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const sabre::Error& e) {
      PyErr_SetString(class_of(e.code).ptr(), e.what());
    }
  });
}

void translate_current_exception() {
  ErrorClasses& c = classes();
  try {
    throw;
  } catch (const py::error_already_set&) {
    throw;  // a Python exception (a progress callback's, KeyboardInterrupt) goes on as it is
  } catch (const sabre::Error& e) {
    raise(class_of(e.code), e.what());
  } catch (const onnx_frontend::ImportError& e) {
    raise(e.kind == onnx_frontend::ImportError::Kind::unsupported ? c.unsupported : c.model, e.what());
  } catch (const codegen::UnsupportedError& e) {
    raise(c.unsupported, e.what());
  } catch (const std::invalid_argument& e) {
    raise(c.invalid_argument, e.what());
  } catch (const std::bad_alloc&) {
    throw;  // pybind11 makes it MemoryError
  } catch (const std::filesystem::filesystem_error& e) {
    raise(c.base, e.what());
  } catch (const std::exception& e) {
    raise(c.compile, e.what());
  }
}

[[noreturn]] void raise_invalid(const std::string& msg) { raise(classes().invalid_argument, msg); }
[[noreturn]] void raise_model(const std::string& msg) { raise(classes().model, msg); }
[[noreturn]] void raise_status(sabre_rt_status code, const std::string& msg) { raise(class_of(code), msg); }

[[noreturn]] void raise_compile_status(CompileStatus status, const std::string& msg) {
  ErrorClasses& c = classes();
  switch (status) {
    case CompileStatus::invalid_argument: raise(c.invalid_argument, msg);
    case CompileStatus::model_error: raise(c.model, msg);
    case CompileStatus::unsupported: raise(c.unsupported, msg);
    case CompileStatus::io_error: raise(c.base, msg);
    case CompileStatus::out_of_memory: throw std::bad_alloc();  // pybind11 makes it MemoryError
    case CompileStatus::ok:
    case CompileStatus::build_failed: break;
  }
  raise(c.compile, msg);
}

}  // namespace sabre::python

PYBIND11_MODULE(_sabre, m) {
  m.doc() = "sabre's compiler and runtime (use the package sabre, not this module)";
  m.attr("__version__") = sabre::version();
  sabre::python::register_errors(m);
  sabre::python::register_compiler(m);
  sabre::python::register_session(m);
}
