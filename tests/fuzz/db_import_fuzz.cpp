// libFuzzer target for `sabre db import` (TuningDb::import_jsonl): arbitrary text is imported or
// refused with a DbError, never a crash or a sanitizer report; a refused import leaves the DB as it
// was, and what was imported survives export and import into a fresh DB.
// Run by tests/fuzz/run_fuzz.sh (ctest: fuzz.db_import).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tune/db.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  sabre::tune::TuningDb db(":memory:");
  db.record({"GPU", 90, "13.0", "4.2.0", "t1"}, {"w", "k", sabre::tune::Status::ok, 1.5, 0, ""});
  const int64_t before = db.count();
  try {
    db.import_jsonl(text);
  } catch (const sabre::tune::DbError&) {
    if (db.count() != before) std::abort();  // a refused file must not leave half its rows
    return 0;
  }
  sabre::tune::TuningDb copy(":memory:");
  copy.import_jsonl(db.export_jsonl());
  if (copy.count() != db.count()) std::abort();
  return 0;
}
