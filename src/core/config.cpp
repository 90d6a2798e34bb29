#include "core/config.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/small_file.hpp"

namespace vsock::core {
namespace {

struct FileSetting {
  std::string name, value;
  int line;
};

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// Parses the file into a profile choice, `set` lines and rules.
void parse_file(std::string_view text, const std::string& name, std::string* profile, int* profile_line,
                std::vector<FileSetting>* sets, Config* config) {
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words = split_words(line);
    if (words.empty()) continue;
    std::string where = name + ":" + std::to_string(line_no) + ": ";
    if (words[0] == "profile") {
      Profile p;
      if (words.size() != 2 || !parse_profile(words[1], &p)) {
        config->diagnostics.push_back(where + "expected 'profile latency|throughput|default'");
        continue;
      }
      *profile = std::string(words[1]);
      *profile_line = line_no;
    } else if (words[0] == "set") {
      if (words.size() != 3) {
        config->diagnostics.push_back(where + "expected 'set NAME VALUE'");
        continue;
      }
      if (!is_setting_name(words[1]) || words[1] == "profile") {
        config->diagnostics.push_back(where + "unknown setting '" + std::string(words[1]) + "'");
        continue;
      }
      sets->push_back({std::string(words[1]), std::string(words[2]), line_no});
    } else {
      Rule rule;
      std::string why;
      if (!parse_rule(words, &rule, &why)) {
        config->diagnostics.push_back(where + why + "; line ignored");
        continue;
      }
      rule.line = line_no;
      config->rules.push_back(std::move(rule));
    }
  }
}

int setting_index(std::string_view name) {
  for (int i = 0; i < kSettingCount; ++i)
    if (name == kSettingNames[i]) return i;
  return -1;
}

void set_origin(Config* config, std::string_view name, SettingOrigin::Kind kind, std::string where) {
  int i = setting_index(name);
  if (i >= 0) config->origins[static_cast<size_t>(i)] = SettingOrigin{kind, std::move(where)};
}

std::string file_line(const std::string& file, int line) { return file + ":" + std::to_string(line); }

}  // namespace

const SettingOrigin& origin_of(const Config& config, std::string_view name) {
  static const SettingOrigin kUnknown;
  int i = setting_index(name);
  if (i < 0 || static_cast<size_t>(i) >= config.origins.size()) return kUnknown;
  return config.origins[static_cast<size_t>(i)];
}

Config build_config(EnvLookup env, const char* file_name, const std::string* file_text) {
  Config config;
  config.origins.resize(static_cast<size_t>(kSettingCount));
  std::string profile;
  int profile_line = 0;
  std::vector<FileSetting> sets;
  if (file_text != nullptr) {
    config.file = file_name;
    parse_file(*file_text, config.file, &profile, &profile_line, &sets, &config);
  }
  if (!profile.empty()) set_origin(&config, "profile", SettingOrigin::Kind::kFile, file_line(config.file, profile_line));
  // The profile goes first: its bundle is the base the other settings adjust.
  if (const char* p = env("VSOCK_PROFILE")) {
    Profile parsed;
    if (parse_profile(p, &parsed)) {
      profile = p;
      set_origin(&config, "profile", SettingOrigin::Kind::kEnv, "VSOCK_PROFILE");
    } else config.diagnostics.push_back(std::string("VSOCK_PROFILE=") + p +
                                      ": expected latency, throughput or default; using " +
                                      (profile.empty() ? "default" : profile));
  }
  Profile chosen = Profile::kDefault;
  if (!profile.empty()) parse_profile(profile, &chosen);
  apply_profile(&config.settings, chosen);
  // A profile nobody chose is the default; a chosen one (even `default`)
  // is where its bundle's values come from.
  if (!profile.empty())
    for (int i = 0; i < kSettingCount; ++i)
      if (is_profile_setting(kSettingNames[i]))
        config.origins[static_cast<size_t>(i)] = SettingOrigin{SettingOrigin::Kind::kProfile, profile};

  for (const FileSetting& s : sets) {
    std::string why;
    if (apply_setting(&config.settings, s.name, s.value, &why))
      set_origin(&config, s.name, SettingOrigin::Kind::kFile, file_line(config.file, s.line));
    else
      config.diagnostics.push_back(file_line(config.file, s.line) + ": " + s.name + " " + s.value + ": " + why +
                                   "; keeping the previous value");
  }
  for (int i = 0; i < kSettingCount; ++i) {
    std::string_view name = kSettingNames[i];
    if (name == "profile") continue;
    std::string var = env_name_of(name);
    const char* value = env(var.c_str());
    if (value == nullptr) continue;
    std::string why;
    if (apply_setting(&config.settings, name, value, &why))
      set_origin(&config, name, SettingOrigin::Kind::kEnv, var);
    else
      config.diagnostics.push_back(var + "=" + value + ": " + why + "; keeping the previous value");
  }
  return config;
}

namespace {

const char* real_getenv(const char* name) { return std::getenv(name); }

Config* load_process_config() {
  const char* path = std::getenv("VSOCK_CONFIG");
  bool explicit_path = path != nullptr && path[0] != '\0';
  if (!explicit_path) path = kDefaultConfigFile;
  std::string text;
  bool have_file = read_small_file(path, &text);
  auto* config = new Config(build_config(real_getenv, path, have_file ? &text : nullptr));
  if (!have_file && explicit_path)
    config->diagnostics.push_back(std::string("VSOCK_CONFIG=") + path + ": cannot read the file; using defaults");
  log_set_level(config->settings.log_level);
  if (!log_open_file(config->settings.log_file.c_str()))
    config->diagnostics.push_back("VSOCK_LOG_FILE=" + config->settings.log_file +
                                  ": cannot open for writing; logging to stderr");
  return config;
}

}  // namespace

void report_config_problems() {
  // Always reported, whatever the log level, on stderr, once per process.
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  for (const std::string& d : config().diagnostics) {
    std::string line = "libvsock[" + std::to_string(::syscall(SYS_getpid)) + "]: configuration: " + d + "\n";
    ::syscall(SYS_write, 2, line.data(), line.size());
  }
}

const Config& config() {
  // Never destroyed: sockets may be used by other libraries' destructors.
  static Config* instance = load_process_config();
  return *instance;
}

}  // namespace vsock::core
