// The example models scripts/make_models.py writes into <build>/models (target sabre_models, which
// needs the .venv python; tests/models/CMakeLists.txt). SABRE_MODELS_GENERATED says whether this
// build makes them: there a missing model fails the test; in a build without that python the test
// skips and names the prerequisite.
#pragma once

#include <filesystem>
#include <string>

namespace sabre::test_util {

inline std::string generated_model(const std::string& name) {
  return std::string(SABRE_BINARY_DIR) + "/models/" + name + ".onnx";
}

}  // namespace sabre::test_util

#ifdef SABRE_MODELS_GENERATED
#define SABRE_REQUIRE_GENERATED_MODEL(path) \
  ASSERT_TRUE(std::filesystem::exists(path)) << (path) << " is missing: build the target sabre_models"
#else
#define SABRE_REQUIRE_GENERATED_MODEL(path)                                                          \
  GTEST_SKIP() << "no Python at .venv/bin/python, so " << (path) << " is not generated (run scripts/setup.sh, " \
               << "then reconfigure)"
#endif
