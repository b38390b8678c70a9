#pragma once
// One test body, two stores: a fixture that makes a memory store or a TCP server plus clients on port 0.

#include <dcomm/store.hpp>

#include <memory>
#include <string>

namespace dcomm::test {

struct StoreFixture {
  std::string kind;
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> store;

  StoreFixture(std::string k, Duration timeout) : kind(std::move(k)), timeout_(timeout) {
    if (kind == "memory") {
      store = make_memory_store(timeout);
    } else {
      server = start_tcp_store_server("127.0.0.1", 0);
      store = client();
    }
  }
  /// Another handle on the same keys: a fresh TCP client, or the memory store itself.
  std::shared_ptr<Store> client() {
    if (kind == "memory") return store;
    TcpStoreOptions o;
    o.timeout = timeout_;
    return connect_tcp_store("127.0.0.1", server->port(), o);
  }

 private:
  Duration timeout_;
};

inline Store::Bytes bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }

}  // namespace dcomm::test
