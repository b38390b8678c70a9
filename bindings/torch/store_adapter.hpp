#pragma once
// dcomm's Store over the c10d::Store torch hands to a backend (a PrefixStore over torch's TCPStore or FileStore),
// so that dcomm's rendezvous and mesh set-up run through the same store as torch's own groups.

#include <memory>

#include <dcomm/store.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dcomm_torch {

/// `describe` names the store in dcomm's errors ("torch store of group 'default_pg'").
std::shared_ptr<dcomm::Store> adapt_store(c10::intrusive_ptr<c10d::Store> store, std::string describe);

}  // namespace dcomm_torch
