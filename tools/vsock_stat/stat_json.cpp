#include "tools/vsock_stat/stat_json.hpp"

#include <cstdio>

#include "tools/vsock_stat/process_totals.hpp"

namespace vsock::tools {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t utf8_length(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

class Writer {
 public:
  void open(char c) {
    comma();
    out_ += c;
    first_ = true;
  }
  void close(char c) {
    out_ += c;
    first_ = false;
  }
  void key(const char* name) {
    comma();
    out_ += json_string(name);
    out_ += ':';
    first_ = true;  // the value follows without a comma
  }
  void value(uint64_t v) { raw(std::to_string(v)); }
  void value(int64_t v) { raw(std::to_string(v)); }
  void value(bool v) { raw(v ? "true" : "false"); }
  void value(const std::string& v) { raw(json_string(v)); }
  template <class T>
  void field(const char* name, T v) {
    key(name);
    value(v);
  }
  void field(const char* name, const char* v) { field(name, std::string(v)); }
  std::string take() { return std::move(out_); }

 private:
  void comma() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  void raw(const std::string& text) {
    comma();
    out_ += text;
  }
  std::string out_;
  bool first_ = true;
};

void write_socket(Writer& w, const core::SocketRecord& r) {
  w.open('{');
  w.field("fd", int64_t{r.fd});
  w.field("protocol", protocol_name(r.protocol));
  w.field("role", role_name(r.role));
  w.field("local", endpoint_text(r.family, r.local_addr, r.local_port));
  w.field("peer", endpoint_text(r.family, r.peer_addr, r.peer_port));
  w.field("path", core::socket_path_name(static_cast<core::SocketPath>(r.path)));
  w.field("kernel_reason", core::kernel_why_name(static_cast<core::KernelWhy>(r.why)));
  w.field("tcp_bytes_sent", r.tcp_bytes_sent);
  w.field("tcp_bytes_received", r.tcp_bytes_received);
  w.field("rdma_bytes_sent", r.rdma_bytes_sent);
  w.field("rdma_bytes_received", r.rdma_bytes_received);
  w.field("rdma_in_flight", r.rdma_in_flight);
  w.field("rdma_readable", r.rdma_readable);
  w.field("credit_stalls", r.credit_stalls);
  w.close('}');
}

void write_process(Writer& w, const ProcessStats& p) {
  const core::SegmentSnapshot& s = p.snapshot;
  w.open('{');
  w.field("pid", int64_t{p.pid});
  w.field("program", fixed_text(s.header.program));
  w.field("profile", fixed_text(s.header.profile));
  w.field("library_version", fixed_text(s.header.library_version));
  w.field("segment", p.path);
  w.field("created_unix_ns", s.header.created_unix_ns);
  w.field("published_unix_ns", s.info.published_unix_ns);
  w.field("publish_count", s.info.publish_count);
  w.field("fresh", p.fresh);
  const ProcessTotals t = process_totals(s);
  w.key("totals");
  w.open('{');
  w.field("rdma_bytes_sent", t.rdma_bytes_sent);
  w.field("rdma_bytes_received", t.rdma_bytes_received);
  w.field("rdma_messages_sent", t.rdma_messages_sent);
  w.field("rdma_messages_received", t.rdma_messages_received);
  w.field("kernel_bytes_sent", t.kernel_bytes_sent);
  w.field("kernel_bytes_received", t.kernel_bytes_received);
  w.field("kernel_messages_sent", t.kernel_messages_sent);
  w.field("kernel_messages_received", t.kernel_messages_received);
  w.field("upgrade_attempts", t.upgrade_attempts);
  w.field("upgrades_done", t.upgrades_done);
  w.field("upgrade_resets", t.upgrade_resets);
  w.key("kernel_reasons");
  w.open('{');
  for (const auto& [reason, count] : t.fallbacks) w.field(reason.c_str(), count);
  w.close('}');
  w.close('}');
  w.key("counters");
  w.open('{');
  for (size_t i = 0; i < s.counter_names.size() && i < s.counters.size(); ++i)
    w.field(s.counter_names[i].c_str(), s.counters[i]);
  w.close('}');
  w.field("sockets_seen", uint64_t{s.info.sockets_seen});
  w.field("sockets_listed", uint64_t{s.rows.size()});
  w.key("sockets");
  w.open('[');
  for (const core::SocketRecord& row : s.rows) write_socket(w, row);
  w.close(']');
  w.close('}');
}

}  // namespace

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n != 0) {
      out.append(text, i, n);
      i += n;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
      ++i;
    }
  }
  return out + "\"";
}

std::string render_json(const ScanResult& scan, int64_t now_unix_ns) {
  Writer w;
  w.open('{');
  w.field("format", int64_t{1});
  w.field("time_unix_ns", now_unix_ns);
  w.field("removed_stale", int64_t{scan.removed_stale});
  w.key("errors");
  w.open('[');
  for (const std::string& error : scan.errors) w.value(error);
  w.close(']');
  w.key("processes");
  w.open('[');
  for (const ProcessStats& p : scan.processes) write_process(w, p);
  w.close(']');
  w.close('}');
  return w.take() + "\n";
}

}  // namespace vsock::tools
