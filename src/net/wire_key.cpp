#include "net/wire_key.h"

#include "util/error.h"

#include <sodium.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera {

namespace {

void init_sodium() {
    if (::sodium_init() < 0) throw make_error("libsodium failed to initialize");
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

WireKey random_key() {
    init_sodium();
    WireKey key;
    ::randombytes_buf(key.bytes.data(), key.bytes.size());
    return key;
}

std::string key_to_hex(const WireKey& key) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (uint8_t b : key.bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

WireKey key_from_hex(const std::string& text, const std::string& source) {
    std::string t = text;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    WireKey key;
    if (t.size() != 2 * key.bytes.size()) {
        throw make_error("{}: not a tessera key (expected 64 hex digits, found {} characters); make one with "
                         "`tessera keygen -o FILE`", source, t.size());
    }
    for (size_t i = 0; i < key.bytes.size(); ++i) {
        const int hi = hex_digit(t[2 * i]), lo = hex_digit(t[2 * i + 1]);
        if (hi < 0 || lo < 0) throw make_error("{}: not a tessera key (a character is not a hex digit)", source);
        key.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    return key;
}

void write_new_key_file(const std::string& path) {
    const WireKey key = random_key();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) throw make_error("{} exists: refusing to replace a key (remove it first)", path);
        throw make_error("cannot create {}: {}", path, std::strerror(errno));
    }
    // The umask may have narrowed the mode, never widened it; make it exact.
    ::fchmod(fd, 0600);
    const std::string text = key_to_hex(key) + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const bool closed = ::close(fd) == 0;
    if (!ok || !closed) {
        ::unlink(path.c_str());
        throw make_error("cannot write {}", path);
    }
}

WireKey read_key_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw make_error("key file {}: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw make_error("key file {} is not a regular file", path);
    }
    if ((st.st_mode & 077) != 0) {
        ::close(fd);
        throw make_error("key file {} can be read by others (mode {:04o}): run `chmod 600 {}`", path,
                         st.st_mode & 07777, path);
    }
    char buf[130];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n < 0) throw make_error("key file {}: {}", path, std::strerror(errno));
    return key_from_hex(std::string(buf, static_cast<size_t>(n)), "key file " + path);
}

std::shared_ptr<const WireKey> key_from_flag_or_env(const std::string& flag_path) {
    std::string path = flag_path;
    if (path.empty()) {
        const char* env = std::getenv("TESSERA_KEY_FILE");
        if (env != nullptr) path = env;
    }
    if (path.empty()) return nullptr;
    return std::make_shared<const WireKey>(read_key_file(path));
}

}  // namespace tessera
