// sabre --version: the CMake project version and the git commit of the tree built (version.cmake
// regenerates sabre_git_commit.h at every build, so the commit is never a stale one).
#include <string>

#include "cli_util.h"
#include "sabre_git_commit.h"

namespace sabre::cli {

std::string version_text() {
  std::string v = "sabre " SABRE_VERSION;
  if (std::string commit = SABRE_GIT_COMMIT; !commit.empty()) v += " (git " + commit + ")";
  return v;
}

}  // namespace sabre::cli
