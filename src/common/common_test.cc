// The common helpers with behaviour of their own: base64.
#include <string>

#include <gtest/gtest.h>

#include "common/base64.h"

namespace estuary {
namespace {

TEST(Base64, EncodesTheRfc4648TestVectors) {
  // RFC 4648, section 10.
  EXPECT_EQ(EncodeBase64(""), "");
  EXPECT_EQ(EncodeBase64("f"), "Zg==");
  EXPECT_EQ(EncodeBase64("fo"), "Zm8=");
  EXPECT_EQ(EncodeBase64("foo"), "Zm9v");
  EXPECT_EQ(EncodeBase64("foob"), "Zm9vYg==");
  EXPECT_EQ(EncodeBase64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(EncodeBase64("foobar"), "Zm9vYmFy");
}

TEST(Base64, DecodesWhatItEncodesForEveryByteAndEveryLength) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (size_t n = 0; n <= all.size(); n += 1 + n / 16) {
    const std::string bytes = all.substr(all.size() - n);
    EXPECT_EQ(DecodeBase64(EncodeBase64(bytes)), bytes) << n;
  }
  EXPECT_EQ(DecodeBase64("Zm9vYmE="), "fooba");
}

TEST(Base64, RefusesWhatIsNotPaddedBase64) {
  EXPECT_FALSE(DecodeBase64("Zm9"));       // not a multiple of 4
  EXPECT_FALSE(DecodeBase64("Zm9v!mFy"));  // outside the alphabet
  EXPECT_FALSE(DecodeBase64("Zg==Zm9v"));  // padding before the end
  EXPECT_FALSE(DecodeBase64("Z=9v"));      // padding inside a group
  EXPECT_FALSE(DecodeBase64("Zm=v"));
}

}  // namespace
}  // namespace estuary
