// SPDX-License-Identifier: Apache-2.0
// json_release.h: destroying a parsed nlohmann::json without allocating.
#pragma once

#include <nlohmann/json.hpp>

namespace afm_local {

/** Empties `value` leaves first, so that destroying it allocates nothing.
 *
 *  nlohmann::json's destructor flattens a non-empty array or object onto a heap-allocated stack (to avoid deep
 *  recursion); when that allocation fails inside the (noexcept) destructor, the process ends in std::terminate.
 *  Destroying the children of a container before the container itself means every destructor call sees an empty
 *  container or a scalar, and allocates nothing. The recursion depth is bounded by the nesting limit the parsers
 *  check before parsing (request.cpp). */
template <typename Json> void json_release(Json &value) noexcept {
    if (value.is_array()) {
        auto &array = value.template get_ref<typename Json::array_t &>();
        for (auto &element : array) json_release(element);
        array.clear();
    } else if (value.is_object()) {
        auto &object = value.template get_ref<typename Json::object_t &>();
        for (auto &entry : object) json_release(entry.second);
        object.clear();
    }
}

/** Parses [begin, end) into `doc` (which must be null), building the tree in place; false when it is not valid JSON.
 *
 *  json::parse builds into a local of its own: when an allocation fails mid-parse, or the input turns out invalid
 *  (it then assigns `discarded` to that local), the partial tree is destroyed by nlohmann's destructor, which
 *  allocates, and a second failure (memory still exhausted, e.g. the runner at its address-space limit) is
 *  std::terminate. Parsing with the DOM SAX builder into the caller's `doc` leaves the partial tree there instead,
 *  for the caller's JsonReleaser to free without allocating, whether the parse failed or threw. */
template <typename Json> bool json_parse_into(Json &doc, const char *begin, const char *end) {
    using Adapter = decltype(nlohmann::detail::input_adapter(begin, end));
    nlohmann::detail::json_sax_dom_parser<Json, Adapter> builder(doc, false);
    return Json::sax_parse(begin, end, &builder) && !builder.is_errored();
}

/** Holds a parsed document and releases it without allocating (json_release) when it goes out of scope. */
template <typename Json> struct JsonReleaser {
    Json &value;
    ~JsonReleaser() { json_release(value); }
};

}  // namespace afm_local
