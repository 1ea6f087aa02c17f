// A hostile peer for end-to-end tests of the wire: a fake root and a fake
// worker built from the real protocol code (the key handshake, frames, JSON
// messages), which then send what a broken or malicious node would. Real
// `tessera worker` and `tessera run` processes are on the other end.
#pragma once

#include "cluster/session/json_messages.h"
#include "cluster/session/session_messages.h"
#include "net/channel.h"
#include "net/shm_link.h"
#include "net/tcp.h"
#include "net/wire_key.h"
#include "subprocess.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tessera::test {

// The bundled default model and its fingerprint.
std::string default_model();
std::string default_fingerprint();

// A fresh key file (tessera keygen) in `dir`.
std::string make_key_file(const std::string& dir, const std::string& name);

// A `tessera worker` serving many sessions (no --once) on a free loopback
// port (unless extra_args give --listen), its stderr kept in a file.
class WorkerProcess {
public:
    explicit WorkerProcess(const std::vector<std::string>& extra_args, const std::string& log_path);
    HostPort address() const { return address_; }
    std::string address_text() const { return address_.str(); }
    std::string log() const;
    int pid() const { return process_->pid(); }
    BackgroundProcess& process() { return *process_; }

private:
    std::unique_ptr<BackgroundProcess> process_;
    HostPort address_;
    std::string log_path_;
};

// Connects and runs the key handshake as a root would.
std::unique_ptr<FrameChannel> connect_as_root(const HostPort& address, const WireKey* key, int timeout_ms = 3000);

// A hello and an assign message a real root would send for the whole default
// model on one worker; tests break one field at a time.
json good_hello();
json good_assign();

// The header of a root's step (an exact partial or float rows).
StepHeader step_header(const Frame& frame);
// Answers a root's exact partial with a partial of zeros of its shape.
void answer_with_zeros(FrameChannel& channel, const Frame& step);

// `tessera run --workers ADDRESS` (a short greedy run) with optional key file.
ProcessResult run_root(const std::string& workers, const std::string& key_file, const std::vector<std::string>& extra = {});

// The peak resident memory of a process (VmHWM), in bytes; 0 if unknown.
uint64_t peak_memory_of(int pid);

// A fake worker on a free loopback port: it runs the key handshake, answers
// hello and assign like a real worker holding the default model, then hands
// every step frame to `on_step`, which answers as it likes.
class FakeWorker {
public:
    using StepHandler = std::function<void(FrameChannel& channel, const Frame& step)>;
    // `link`: a shared-memory link offered in hello_reply, which the fake
    // takes after assign as a real worker does.
    FakeWorker(const WireKey* key, StepHandler on_step, json hello_reply = json(),
               std::unique_ptr<ShmLink> link = nullptr);
    ~FakeWorker();
    std::string address_text() const;

private:
    std::unique_ptr<TcpListener> listener_;
    std::unique_ptr<ShmLink> link_;
    std::thread thread_;
};

}  // namespace tessera::test
