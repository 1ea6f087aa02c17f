// Key files: keygen writes 64 hex digits with mode 0600 and never replaces a
// file; a key readable by group or others, or anything but 64 hex digits, is
// refused with a message saying how to fix it.
#include "net/wire_key.h"

#include "test_errors.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>

namespace tessera {

using test::error_of;

TEST(WireKey, KeygenWritesAPrivateFileAndNeverReplacesOne) {
    const std::string path = test::scratch_dir("wire_key") + "/cluster.key";
    write_new_key_file(path);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    const WireKey key = read_key_file(path);
    EXPECT_EQ(key_from_hex(key_to_hex(key), "again").bytes, key.bytes);
    EXPECT_NE(error_of([&] { write_new_key_file(path); }).find("refusing to replace a key"), std::string::npos);
    EXPECT_EQ(read_key_file(path).bytes, key.bytes);
    EXPECT_NE(random_key().bytes, random_key().bytes);
}

TEST(WireKey, ReadableOrMalformedKeysAreRefused) {
    const std::string dir = test::scratch_dir("wire_key");
    const std::string path = dir + "/cluster.key";
    write_new_key_file(path);
    ::chmod(path.c_str(), 0644);
    EXPECT_NE(error_of([&] { read_key_file(path); }).find("can be read by others (mode 0644): run `chmod 600"),
              std::string::npos);
    const std::string bad = dir + "/bad.key";
    std::ofstream(bad) << "not a key\n";
    ::chmod(bad.c_str(), 0600);
    EXPECT_NE(error_of([&] { read_key_file(bad); }).find("expected 64 hex digits"), std::string::npos);
    std::ofstream(bad) << std::string(63, 'a') << "g\n";
    EXPECT_NE(error_of([&] { read_key_file(bad); }).find("not a hex digit"), std::string::npos);
    EXPECT_NE(error_of([&] { read_key_file(dir + "/missing.key"); }).find("No such file"), std::string::npos);
}

}  // namespace tessera
