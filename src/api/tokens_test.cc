// The tokens file: what a valid file means, and every way a line can be rejected — always naming
// the file, the line and the field, and never echoing a token.
#include "api/tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace estuary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Tokens of the minimum length (16) and more.
constexpr char kAlice[] = "alice-token-0001";
constexpr char kBob[] = "bob-token-000002";
constexpr char kAgent[] = "agent-token-0003";

StatusOr<TokenTable> Parse(std::string_view text) { return TokenTable::Parse(text, "tokens.txt"); }

// The message of parsing `text`, which must fail with InvalidArgument.
std::string ErrorOf(std::string_view text) {
  StatusOr<TokenTable> t = Parse(text);
  EXPECT_FALSE(t.ok()) << "parsed: " << text;
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), Not(HasSubstr("\n")));
  return t.status().message();
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("estuary_tokens_test_" + name)).string();
}

void WriteFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TEST(TokenTable, EachLineMapsATokenToItsRoleAndName) {
  StatusOr<TokenTable> t =
      Parse(std::string(kAlice) + " tenant alice\n" + kBob + " admin ops\n" + kAgent + " agent node-7\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 3u);
  const Principal* alice = t->Find(kAlice);
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->role, Role::kTenant);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(t->Find(kBob)->role, Role::kAdmin);
  EXPECT_EQ(t->Find(kAgent)->role, Role::kAgent);
  EXPECT_EQ(t->Find(kAgent)->name, "node-7");
}

TEST(TokenTable, AnUnknownTokenHasNoPrincipal) {
  StatusOr<TokenTable> t = Parse(std::string(kAlice) + " tenant alice\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Find("alice-token-0002"), nullptr);
  EXPECT_EQ(t->Find("alice-token-000"), nullptr);  // a prefix is not the token
  EXPECT_EQ(t->Find(""), nullptr);
}

TEST(TokenTable, AnEmptyFileIsAValidTableWithNoTokens) {
  StatusOr<TokenTable> t = Parse("");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->size(), 0u);
  EXPECT_TRUE(Parse("\n\n# only comments\n   \n").ok());
}

TEST(TokenTable, BlankLinesAndCommentLinesAreIgnoredButStillCounted) {
  StatusOr<TokenTable> t = Parse("# tokens\n\n   \t\n  # indented comment\n" + std::string(kAlice) + " tenant alice\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 1u);
  // Line numbers in messages count the ignored lines too.
  EXPECT_EQ(ErrorOf("# tokens\n\n" + std::string(kAlice) + " root alice\n"),
            "tokens.txt:3: field 'role': 'root' is not one of admin, tenant, agent");
}

TEST(TokenTable, FieldsAreSeparatedByAnyRunOfSpacesAndTabs) {
  StatusOr<TokenTable> t = Parse("  " + std::string(kAlice) + " \t  tenant\t\talice  \t\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Find(kAlice)->name, "alice");
}

TEST(TokenTable, CrlfLineEndingsAndAMissingFinalNewlineAreTolerated) {
  StatusOr<TokenTable> t = Parse("# windows\r\n" + std::string(kAlice) + " tenant alice\r\n\r\n" + kBob + " admin ops");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Find(kAlice)->name, "alice");  // not "alice\r"
  EXPECT_EQ(t->Find(kBob)->name, "ops");
}

TEST(TokenTable, AUtf8ByteOrderMarkAtTheStartIsSkipped) {
  StatusOr<TokenTable> t = Parse("\xEF\xBB\xBF" + std::string(kAlice) + " tenant alice\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_NE(t->Find(kAlice), nullptr);
}

TEST(TokenTable, ANameMayHaveSeveralTokensForRotation) {
  StatusOr<TokenTable> t = Parse(std::string(kAlice) + " tenant alice\n" + kBob + " tenant alice\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Find(kAlice)->name, "alice");
  EXPECT_EQ(t->Find(kBob)->name, "alice");
}

TEST(TokenTable, TokensOf16To256PrintableCharactersAreAccepted) {
  const std::string shortest(16, 'a'), longest(256, 'z');
  const std::string punctuation = "!\"$%&'()*+,-./:;<=>?@[\\]^_`{|}~#";  // '#' is fine after the start
  StatusOr<TokenTable> t =
      Parse(shortest + " agent a\n" + longest + " agent b\n" + punctuation + " agent c\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Find(shortest)->name, "a");
  EXPECT_EQ(t->Find(longest)->name, "b");
  EXPECT_EQ(t->Find(punctuation)->name, "c");
}

TEST(TokenTable, ARoleOutsideAdminTenantAgentIsRejectedNamingFileLineAndField) {
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant alice\n\n" + kBob + " root bob\n"),
            "tokens.txt:3: field 'role': 'root' is not one of admin, tenant, agent");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " Admin alice\n"),
            "tokens.txt:1: field 'role': 'Admin' is not one of admin, tenant, agent");  // case matters
}

TEST(TokenTable, ALongOrUnprintableRoleIsDescribedByItsLengthOnlyAsItMayBeAToken) {
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " " + kBob + " alice\n"),
            "tokens.txt:1: field 'role': a 16-character value is not one of admin, tenant, agent");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " adm\x01n alice\n"),
            "tokens.txt:1: field 'role': a 5-character value is not one of admin, tenant, agent");
}

TEST(TokenTable, AMissingRoleOrNameIsRejected) {
  EXPECT_EQ(ErrorOf(std::string(kAlice) + "\n"), "tokens.txt:1: field 'role': missing");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant\n"), "tokens.txt:1: field 'name': missing");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant \t \r\n"), "tokens.txt:1: field 'name': missing");
}

TEST(TokenTable, ExtraFieldsAreRejectedWithAHintThatATokenHasNoSpaces) {
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant alice smith\n"),
            "tokens.txt:1: 4 fields, expected 3: TOKEN ROLE NAME (a token has no spaces)");
  EXPECT_EQ(ErrorOf("alice token 0001 with spaces tenant alice\n"),
            "tokens.txt:1: 7 fields, expected 3: TOKEN ROLE NAME (a token has no spaces)");
}

TEST(TokenTable, ATokenShorterThan16OrLongerThan256CharactersIsRejectedWithoutEchoingIt) {
  const std::string short_token(15, 'x'), long_token(257, 'y');
  const std::string short_error = ErrorOf(short_token + " tenant alice\n");
  EXPECT_EQ(short_error, "tokens.txt:1: field 'token': 15 characters, fewer than 16");
  const std::string long_error = ErrorOf("\n" + long_token + " tenant alice\n");
  EXPECT_EQ(long_error, "tokens.txt:2: field 'token': 257 characters, more than 256");
  EXPECT_THAT(short_error, Not(HasSubstr("xxx")));
  EXPECT_THAT(long_error, Not(HasSubstr("yyy")));
}

TEST(TokenTable, ATokenWithANonPrintableCharacterIsRejectedNamingItsPosition) {
  EXPECT_EQ(ErrorOf("alice-token\x01-0001 tenant alice\n"),
            "tokens.txt:1: field 'token': character 12 is not printable ASCII");
  EXPECT_EQ(ErrorOf("alice-token-\xC3\xA9-0001 tenant alice\n"),
            "tokens.txt:1: field 'token': character 13 is not printable ASCII");
  EXPECT_EQ(ErrorOf("alice-token-0001\x7f tenant alice\n"),
            "tokens.txt:1: field 'token': character 17 is not printable ASCII");
  // Only a CR that ends the line belongs to the line ending.
  EXPECT_EQ(ErrorOf("alice-token\r-0001 tenant alice\n"),
            "tokens.txt:1: field 'token': character 12 is not printable ASCII");
  EXPECT_EQ(ErrorOf(std::string("alice-token") + '\0' + "-0001 tenant alice\n"),
            "tokens.txt:1: field 'token': character 12 is not printable ASCII");
}

TEST(TokenTable, ANameMustBe1To63CharactersOfLettersDigitsDotUnderscoreAndDash) {
  EXPECT_TRUE(Parse(std::string(kAlice) + " tenant " + std::string(63, 'n') + "\n").ok());
  EXPECT_TRUE(Parse(std::string(kAlice) + " tenant A.z_0-9\n").ok());
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant " + std::string(64, 'n') + "\n"),
            "tokens.txt:1: field 'name': 64 characters, more than 63");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant ali/ce\n"),
            "tokens.txt:1: field 'name': character 4 is not one of [A-Za-z0-9._-]");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " tenant \xC3\xA9lise\n"),
            "tokens.txt:1: field 'name': character 1 is not one of [A-Za-z0-9._-]");
}

TEST(TokenTable, ATokenMayAppearOnlyOnceAndTheDuplicateNamesTheFirstLineNotTheToken) {
  const std::string error =
      ErrorOf(std::string(kAlice) + " tenant alice\n" + kBob + " admin ops\n" + kAlice + " tenant alice2\n");
  EXPECT_EQ(error, "tokens.txt:3: field 'token': duplicate of line 1");
  EXPECT_THAT(error, Not(HasSubstr(kAlice)));
}

TEST(TokenTable, TheFirstBadLineIsReportedAndChecksRunTokenThenRoleThenName) {
  EXPECT_EQ(ErrorOf("short root bad/name\n" + std::string(kAlice) + " root alice\n"),
            "tokens.txt:1: field 'token': 5 characters, fewer than 16");
  EXPECT_EQ(ErrorOf(std::string(kAlice) + " root bad/name\n"),
            "tokens.txt:1: field 'role': 'root' is not one of admin, tenant, agent");
}

TEST(TokenTable, ReadParsesAFileAndNamesItInErrors) {
  const std::string path = TempPath("good.txt");
  WriteFile(path, std::string(kAlice) + " tenant alice\n");
  StatusOr<TokenTable> t = TokenTable::Read(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Find(kAlice)->name, "alice");

  const std::string bad = TempPath("bad.txt");
  WriteFile(bad, std::string(kAlice) + " root alice\n");
  StatusOr<TokenTable> b = TokenTable::Read(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), bad + ":1: field 'role': 'root' is not one of admin, tenant, agent");
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

TEST(TokenTable, AFileThatCannotBeReadIsNotFoundNamingThePath) {
  const std::string missing = TempPath("does-not-exist.txt");
  StatusOr<TokenTable> t = TokenTable::Read(missing);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "tokens file '" + missing + "': cannot be read: No such file or directory");

  const std::string dir = TempPath("a-directory");
  std::filesystem::create_directories(dir);
  StatusOr<TokenTable> d = TokenTable::Read(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("tokens file '" + dir + "': cannot be read"));
  std::filesystem::remove(dir);
}

TEST(RoleName, NamesEachRoleAsTheFileSpellsIt) {
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  EXPECT_EQ(RoleName(Role::kTenant), "tenant");
  EXPECT_EQ(RoleName(Role::kAgent), "agent");
}

}  // namespace
}  // namespace estuary
