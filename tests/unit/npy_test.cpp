// .npy reading and writing: bytes numpy wrote, round trips of every dtype, and each bad file's message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/npy.h"

using namespace sabre::ir;

namespace {

// A v1 file laid out the way numpy.save lays it out (header padded so data starts at byte 128).
std::string numpy_file(const std::string& dict, const std::string& data) {
  std::string header = dict + std::string(117 - dict.size(), ' ') + "\n";
  return std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + data;
}

std::string bytes_of(const std::initializer_list<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// The first six bytes of data numpy.save(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1) wrote.
const std::string kF32Data = bytes_of({0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x00, 0xbf, 0x00, 0x00, 0x00, 0x00,
                                       0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0xc0, 0x3f});
const std::string kF32Dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("sabre_npy_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST(Npy, ReadsWhatNumpyWrote) {
  Tensor t = parse_npy(numpy_file(kF32Dict, kF32Data), "a.npy");
  ASSERT_EQ(t.dtype(), DType::f32);
  ASSERT_EQ(t.dims(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.get_f64(i), i * 0.5 - 1) << i;

  Tensor b = parse_npy(numpy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bytes_of({1, 0, 1})),
                       "b.npy");
  ASSERT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.to_i64_vector(), (std::vector<int64_t>{1, 0, 1}));

  Tensor s = parse_npy(numpy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                  bytes_of({7, 0, 0, 0, 0, 0, 0, 0})),
                       "s.npy");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.get_i64(0), 7);
}

TEST(Npy, WritesWhatNumpyWrites) {
  Tensor t(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) t.set_f64(i, i * 0.5 - 1);
  EXPECT_EQ(serialize_npy(t), numpy_file(kF32Dict, kF32Data));
}

TEST(Npy, EveryDtypeRoundTripsThroughAFile) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-100, 100);
  for (DType dt : {DType::f32, DType::f16, DType::f64, DType::i64, DType::i32, DType::i8, DType::u8,
                   DType::boolean}) {
    for (std::vector<int64_t> dims : {std::vector<int64_t>{3, 5, 2}, {7}, {}, {4, 0}}) {
      Tensor t(dt, dims);
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dt == DType::u8 ? std::abs(u(rng)) : u(rng));
      std::string path = tmp_path("rt.npy");
      save_npy(path, t);
      Tensor back = load_npy(path);
      std::remove(path.c_str());
      EXPECT_EQ(back.dtype(), dt) << name(dt);
      EXPECT_EQ(back.dims(), dims) << name(dt);
      EXPECT_EQ(std::memcmp(back.bytes(), t.bytes(), t.nbytes()), 0) << name(dt);
    }
  }
}

TEST(Npy, Bf16IsSavedAsExactF32) {
  Tensor t(DType::bf16, {5});
  for (int i = 0; i < 5; ++i) t.set_f64(i, 1.0 / (i + 3));
  Tensor back = parse_npy(serialize_npy(t), "x");
  ASSERT_EQ(back.dtype(), DType::f32);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back.get_f64(i), t.get_f64(i));
}

TEST(Npy, LargeHeadersUseVersion2) {
  std::vector<int64_t> dims(25000, 1);  // a header over 64 KiB
  Tensor t(DType::i8, dims);
  t.set_f64(0, -5);
  std::string b = serialize_npy(t);
  EXPECT_EQ(b[6], 2);
  Tensor back = parse_npy(b, "big");
  EXPECT_EQ(back.dims().size(), 25000u);
  EXPECT_EQ(back.get_i64(0), -5);
  uint32_t hl = 0;
  std::memcpy(&hl, b.data() + 8, 4);
  EXPECT_EQ((12 + hl) % 64, 0u);  // data 64-byte aligned
}

struct BadNpy {
  std::string bytes;
  std::string message;
};

TEST(Npy, BadFilesSayWhatIsWrong) {
  const std::vector<BadNpy> cases = {
      {"hello", "a.npy: not a .npy file (no \\x93NUMPY magic; save it with numpy.save)"},
      {numpy_file(kF32Dict, kF32Data.substr(0, 16)),
       "a.npy: truncated: shape [2,3] needs 24 bytes of data, file has 16"},
      {numpy_file(kF32Dict, kF32Data).substr(0, 60), "a.npy: truncated: header says 118 bytes, file has 50"},
      {numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", kF32Data),
       "a.npy: array is in Fortran order; save it with numpy.save(f, numpy.ascontiguousarray(a))"},
      {numpy_file("{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", bytes_of({0, 0, 1, 0, 2, 0})),
       "a.npy: dtype '<i2' is not supported; use one of float32, float16, float64, int64, int32, int8, uint8, "
       "bool (little-endian), or str/bytes for string tensors (not object arrays)"},
      {numpy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", bytes_of({0x3f, 0x80, 0, 0})),
       "a.npy: data is big-endian ('>f4'); save it little-endian with a.astype(a.dtype.newbyteorder('<'))"},
      {numpy_file("{'descr': '<f4', 'shape': (1,), }", bytes_of({0, 0, 0, 0})),
       "a.npy: bad .npy header: header lacks one of descr, fortran_order, shape"},
      {numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", bytes_of({0, 0, 0, 0})),
       "a.npy: bad .npy header: shape holds something other than a non-negative integer"},
  };
  for (const auto& c : cases) {
    try {
      parse_npy(c.bytes, "a.npy");
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const NpyError& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(Npy, MissingFileNamesThePath) {
  try {
    load_npy("/nonexistent/x.npy");
    FAIL();
  } catch (const NpyError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '/nonexistent/x.npy': No such file or directory");
  }
}
