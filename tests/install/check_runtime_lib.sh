#!/bin/sh
# libsabre_runtime.so is the runtime only: its SONAME carries the version, it links no compiler
# dependency (ONNX, protobuf, SQLite), holds no compiler code (the layers above src/runtime), and
# exports the C and C++ runtime APIs and nothing else.
# Usage: check_runtime_lib.sh LIB MAJOR.MINOR   (ctest install.runtime_lib)
set -eu
lib=$1
sover=$2
fail() { echo "install.runtime_lib: FAIL: $*"; exit 1; }

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libsabre_runtime.so.$sover" ] || fail "SONAME is '$soname', want libsabre_runtime.so.$sover"

# Direct dependencies (readelf) and everything they pull in (ldd).
deps=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'; ldd "$lib" 2>&1 || true)
bad=$(printf '%s\n' "$deps" | grep -Ei 'onnx|protobuf|sqlite' || true)
[ -z "$bad" ] || fail "links a compiler dependency: $bad"

# Compiler code, exported or not (the full symbol table; the dynamic one where the file is stripped).
syms=$(nm -C "$lib" 2>/dev/null | grep -v 'no symbols' || true)
[ -n "$syms" ] || syms=$(nm -D -C "$lib")
# (The IR's dtype table is the one piece of src/ir the runtime's kernels share: a header-only enum.)
bad=$(printf '%s\n' "$syms" |
      grep -E '^[0-9a-f]* [A-Za-z] ((vtable|typeinfo|typeinfo name|guard variable) for )?sabre::(codegen|onnx_frontend|partition|transform|tune|reference|cutlass_backend|cublaslt|cli|ir)::' |
      grep -v 'sabre::ir::kDTypeInfo' | head -5 || true)
[ -z "$bad" ] || fail "holds compiler code: $bad"
bad=$(printf '%s\n' "$syms" | grep -E ' (google::protobuf|onnx::|sqlite3_)' | head -5 || true)
[ -z "$bad" ] || fail "holds ONNX, protobuf or SQLite code: $bad"

# Exports: the APIs of include/sabre/sabre.h and session.h only.
exports=$(nm -D --defined-only -C "$lib" | sed 's/^[0-9a-f]* [A-Za-z] //; s/@@*SABRE_RUNTIME$//')
for want in sabre_run sabre_session_load sabre_last_error sabre_version 'sabre::Session::Session('; do
  printf '%s\n' "$exports" | grep -qF "$want" || fail "does not export $want"
done
bad=$(printf '%s\n' "$exports" |
      grep -Ev '^(sabre_[a-z_]+$|sabre::(Session|ExecutionContext)::[~A-Za-z_]+(\[abi:cxx11\])?\(|sabre::version\(\)$|typeinfo (name )?for sabre::Error$|SABRE_RUNTIME$)' |
      head -5 || true)
[ -z "$bad" ] || fail "exports more than the runtime API: $bad"
echo "install.runtime_lib: ok: $soname, $(printf '%s\n' "$exports" | wc -l) exported symbols, no compiler code or dependency"
