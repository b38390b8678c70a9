// libFuzzer target over the TCP store's frame decoder and the server's request handling (issue 13): the input is
// what up to four clients send, interleaved, and it goes through the same steps as in ServerLoop::handle_frames
// (header check, the admission rules before authentication, the hello, then StoreService::handle, parking and
// delivery) without sockets, so that millions of inputs run per minute. Built and run by scripts/fuzz-store.sh.
//
// Input: a sequence of records [u8 selector][frame bytes]. selector & 3 picks the client; selector & 0x80 means
// that client disconnects instead (its parked request is forgotten). Frames are a 12-byte header and payload as on
// the wire; a record whose frame is cut short by the end of the input ends the run, as a partial frame would wait.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rendezvous/hello.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/secret.hpp"
#include "rendezvous/store_service.hpp"

namespace proto = dcomm::rdzv::proto;
using dcomm::rdzv::StoreService;

namespace {

// Small caps, so inputs of a few KiB reach the limits; the server's rules are the same at any cap.
constexpr std::size_t kMaxKey = 64;
constexpr std::size_t kMaxValue = 512;
constexpr int kClients = 4;
const char* const kSecret = "fuzz-secret";

// Every frame the server sends must be a well-formed response: a valid header whose length is the payload's.
void check_response(const proto::Bytes& frame) {
  proto::Header h;
  if (frame.size() < proto::kHeaderBytes || proto::check_header(frame.data(), &h) ||
      h.length != frame.size() - proto::kHeaderBytes || h.code > 1) {
    std::abort();
  }
  if (h.code == static_cast<uint8_t>(proto::Status::kError)) {
    proto::Reader r(frame.data() + proto::kHeaderBytes, h.length);
    (void)r.str();  // an error's payload is one string: a ProtocolError here escapes and crashes the run
    r.expect_done();
  }
}

struct Client {
  bool connected = true;
  bool authed = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  StoreService service(kMaxKey, kMaxValue);
  const dcomm::rdzv::JobIdentity job{"DCOMM_RUN_ID=fuzz", 3};
  const std::size_t max_frame = proto::max_payload(kMaxKey, kMaxValue);
  Client clients[kClients];
  std::size_t off = 0;
  while (off < size) {
    uint8_t sel = data[off++];
    int id = sel & 3;
    Client& c = clients[id];
    if (sel & 0x80) {
      service.forget(static_cast<StoreService::ConnId>(id));
      c = Client{};  // a new connection under the same id
      continue;
    }
    if (size - off < proto::kHeaderBytes) break;
    proto::Header h;
    if (proto::check_header(data + off, &h)) break;  // dropped: the rest of the input is another story
    if (dcomm::rdzv::frame_problem(h, c.authed, max_frame)) break;
    if (size - off - proto::kHeaderBytes < h.length) break;
    const uint8_t* payload = data + off + proto::kHeaderBytes;
    off += proto::kHeaderBytes + h.length;
    auto op = static_cast<proto::Op>(h.code);
    if (op == proto::Op::kHello) {
      if (c.authed) break;
      try {
        auto hello = dcomm::rdzv::decode_hello(payload, h.length);
        if (!dcomm::rdzv::secrets_equal(hello.secret, kSecret)) continue;
        if (dcomm::rdzv::job_mismatch(job, hello.job)) continue;
        c.authed = true;
      } catch (const proto::ProtocolError&) {
      }
      continue;
    }
    // The server reads nothing from a client whose request is parked.
    if (service.parked(static_cast<StoreService::ConnId>(id))) continue;
    try {
      auto response = service.handle(static_cast<StoreService::ConnId>(id), op, payload, h.length);
      if (response) check_response(*response);
    } catch (const proto::ProtocolError&) {
      service.forget(static_cast<StoreService::ConnId>(id));
      c = Client{};
    }
    for (auto done = service.take_completed(); !done.empty(); done = service.take_completed()) {
      for (const auto& [conn, frame] : done) {
        if (conn >= kClients) std::abort();
        check_response(frame);
      }
    }
  }
  return 0;
}
