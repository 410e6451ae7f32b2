#include "support/confine.h"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>

namespace sabre::support {

namespace fs = std::filesystem;

bool is_within(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), re = root.end();
  auto q = p.begin(), qe = p.end();
  // A trailing "/" of root is an empty last component; it matches anything.
  for (; r != re; ++r, ++q) {
    if (r->empty() && std::next(r) == re) return true;
    if (q == qe || *r != *q) return false;
  }
  return true;
}

fs::path confine(const fs::path& root, const std::string& rel, const std::string& what) {
  const std::string named = what + " '" + rel + "'";
  if (rel.empty()) throw ConfineError(what + " is an empty path");
  if (rel.find('\0') != std::string::npos) throw ConfineError(named + " holds a NUL byte");
  fs::path r(rel);
  if (r.is_absolute() || r.has_root_name() || r.has_root_directory())
    throw ConfineError(named + " is an absolute path; it must be a relative name inside " + root.string());
  if (std::any_of(r.begin(), r.end(), [](const fs::path& c) { return c == ".."; }))
    throw ConfineError(named + " climbs out with '..'; it must be a relative name inside " + root.string());
  std::error_code ec;
  const fs::path croot = fs::canonical(root.empty() ? fs::path(".") : root, ec);
  if (ec) throw ConfineError(what + ": cannot resolve the folder " + root.string() + ": " + ec.message());
  const fs::path joined = croot / r;
  // Every symlink on the way is followed, the last one included: what is checked is what gets opened.
  const fs::path real = fs::weakly_canonical(joined, ec);
  if (ec) throw ConfineError(named + ": cannot resolve " + joined.string() + ": " + ec.message());
  if (!is_within(croot, real))
    throw ConfineError(named + " resolves to " + real.string() + ", outside " + croot.string() +
                       " (a symlink leaving the folder); copy the file into the folder instead");
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0) throw ConfineError(named + ": cannot open " + joined.string() + " (no such file)", true);
  if (!S_ISREG(st.st_mode)) throw ConfineError(named + " is not a regular file (" + real.string() + ")");
  return real;
}

}  // namespace sabre::support
