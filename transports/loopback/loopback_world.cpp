#include "transports/loopback/loopback_world.hpp"

#include <fmt/format.h>

#include <map>

#include <dcomm/error.hpp>

namespace dcomm::transport::loopback {
namespace {

struct Directory {
  std::mutex mu;
  std::map<std::string, std::map<int, std::shared_ptr<Endpoint>>> worlds;
};

Directory& directory() {
  static Directory* d = new Directory();  // never destroyed: endpoints may unregister during static teardown
  return *d;
}

}  // namespace

std::shared_ptr<Endpoint> register_endpoint(const std::string& world_id, int rank) {
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  auto& world = d.worlds[world_id];
  if (world.count(rank) != 0) {
    throw InvalidUsageError(
        fmt::format("loopback: rank {} of world {} is already registered in this process; two ranks share a rank",
                    rank, world_id));
  }
  auto ep = std::make_shared<Endpoint>();
  world[rank] = ep;
  return ep;
}

std::shared_ptr<Endpoint> find_endpoint(const std::string& world_id, int rank) {
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  auto w = d.worlds.find(world_id);
  if (w == d.worlds.end()) return nullptr;
  auto e = w->second.find(rank);
  return e == w->second.end() ? nullptr : e->second;
}

void unregister_endpoint(const std::string& world_id, int rank) noexcept {
  Directory& d = directory();
  std::lock_guard<std::mutex> lock(d.mu);
  auto w = d.worlds.find(world_id);
  if (w == d.worlds.end()) return;
  w->second.erase(rank);
  if (w->second.empty()) d.worlds.erase(w);
}

}  // namespace dcomm::transport::loopback
