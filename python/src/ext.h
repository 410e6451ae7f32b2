// Shared pieces of the extension module sabre._sabre (python/sabre/ wraps it).
// Tests: tests/python/test_api.py, tests/python/test_gpu.py
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "sabre/compiler.h"
#include "sabre/sabre.h"

namespace sabre::python {

namespace py = pybind11;

// Creates sabre.Error and its subclasses on `m` and translates sabre's C++ exceptions into them.
void register_errors(py::module_& m);
// Inside a catch block: raises the sabre.Error subclass for the exception being handled (a
// Python exception already set goes on as it is). Never returns.
[[noreturn]] void translate_current_exception();
[[noreturn]] void raise_invalid(const std::string& msg);
[[noreturn]] void raise_model(const std::string& msg);
[[noreturn]] void raise_status(sabre_rt_status code, const std::string& msg);
// A failed sabre::compile as the exception a C++ throw of the same failure raised.
[[noreturn]] void raise_compile_status(CompileStatus status, const std::string& msg);

// Runs f, turning sabre's C++ exceptions into sabre.Error subclasses.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    translate_current_exception();
  }
}

// compile, inspect, partition (compiler.cpp).
void register_compiler(py::module_& m);
// Session and Tensor (session.cpp).
void register_session(py::module_& m);

}  // namespace sabre::python
