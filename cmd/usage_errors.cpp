#include "cmd/usage_errors.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::cmd {

// `--json` may come anywhere, and parsing may have failed before CLI11 read it.
bool json_in_argv(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg(argv[i]);
        if (arg == "--") {
            break;
        }
        if (arg == "--json") {
            return true;
        }
        if (arg.starts_with("--json=")) {
            return arg != "--json=false" && arg != "--json=0";
        }
    }
    return false;
}

namespace {

// The subcommands the parse reached, outermost first (the App itself included).
std::vector<const CLI::App*> reached(const CLI::App& app) {
    std::vector<const CLI::App*> chain{&app};
    while (!chain.back()->get_subcommands().empty()) {
        chain.push_back(chain.back()->get_subcommands().back());
    }
    return chain;
}

// `message` and where to read more: "...; run `gpupool jobs --help`".
std::string with_help_hint(const std::string& message, const std::vector<const CLI::App*>& chain) {
    std::string line = "gpupool";
    for (std::size_t i = 1; i < chain.size(); ++i) {
        line += " " + chain[i]->get_name();
    }
    return message + (message.ends_with("?") ? " (run `" : "; run `") + line + " --help`" +
           (message.ends_with("?") ? ")" : "");
}

std::string in_quotes(std::string_view text) {
    return "\"" + util::escape_control(text) + "\"";
}

std::vector<std::string> split_on(std::string_view text, std::string_view sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t at = text.find(sep); at != std::string_view::npos; at = text.find(sep, start)) {
        out.emplace_back(text.substr(start, at - start));
        start = at + sep.size();
    }
    out.emplace_back(text.substr(start));
    return out;
}

bool is_integer_text(std::string_view text) {
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
        text.remove_prefix(1);
    }
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const CLI::Option* find_option(const std::vector<const CLI::App*>& chain, const std::string& name) {
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        if (const CLI::Option* opt = (*it)->get_option_no_throw(name)) {
            return opt;
        }
    }
    return nullptr;
}

// "Could not convert: job = abc" -> `job: expected a job id, got "abc"`.
Error conversion_error(const std::string& what, const std::vector<const CLI::App*>& chain) {
    const std::string prefix = "Could not convert: ";
    const std::size_t eq = what.find(" = ");
    if (!what.starts_with(prefix) || eq == std::string::npos) {
        return make_error(ErrorCode::invalid_input, what);
    }
    const std::string name = what.substr(prefix.size(), eq - prefix.size());
    const std::string given = what.substr(eq + 3);
    const CLI::Option* opt = find_option(chain, name);
    const std::string type = opt != nullptr ? opt->get_type_name() : std::string();
    std::string bare = name;
    bare.erase(0, bare.find_first_not_of('-'));
    std::string expected = "a valid value";
    if (bare == "job" || bare == "jobs") {
        expected = "a job id";
    } else if (bare == "worker" || bare == "sweep") {
        expected = "a " + bare + " id";
    } else if (type.starts_with("UINT")) {
        expected = "a whole number";
    } else if (type.starts_with("INT")) {
        expected = "an integer";
    } else if (type.starts_with("FLOAT")) {
        expected = "a number";
    }
    // A list arrives joined with commas: name the value that is wrong.
    std::string bad = given;
    if (type.starts_with("INT") || type.starts_with("UINT")) {
        for (const auto& v : split_on(given, ",")) {
            if (!is_integer_text(v)) {
                bad = v;
                break;
            }
        }
    }
    return make_error(ErrorCode::invalid_input, "expected " + expected + ", got " + in_quotes(bad), name);
}

// "A subcommand is required", or one that does not exist (CLI11 reports both the same way).
Error missing_command(const std::vector<const CLI::App*>& chain) {
    const CLI::App& at = *chain.back();
    std::vector<std::string> names;
    for (const CLI::App* sub : at.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); })) {
        names.push_back(sub->get_name());
    }
    // What nothing took (a subcommand's leftovers fall through to its parent): the first word.
    const std::vector<std::string> left = chain.front()->remaining(true);
    const auto word = std::find_if(left.begin(), left.end(), [](const std::string& a) { return !a.starts_with("-"); });
    if (word != left.end()) {
        std::string msg = "unknown command " + in_quotes(*word);
        if (auto near = util::nearest(*word, names)) {
            msg += "; did you mean `" + *near + "`?";
        } else {
            msg += "; commands are " + util::join(names, ", ");
        }
        return make_error(ErrorCode::invalid_input, with_help_hint(msg, chain));
    }
    const std::string who = chain.size() == 1 ? std::string("gpupool") : "gpupool " + at.get_name();
    return make_error(ErrorCode::invalid_input,
                      with_help_hint("`" + who + "` needs a command: " + util::join(names, ", "), chain));
}

// Long option names (`--limit`) of the subcommands reached, for suggestions.
std::vector<std::string> option_names(const std::vector<const CLI::App*>& chain) {
    std::vector<std::string> names;
    for (const CLI::App* a : chain) {
        for (const CLI::Option* opt : a->get_options()) {
            for (const auto& l : opt->get_lnames()) {
                names.push_back("--" + l);
            }
        }
    }
    return names;
}

// Arguments nothing took: unknown options first (with a suggestion), else the extra arguments.
Error extras_error(const CLI::App& app, const std::vector<const CLI::App*>& chain, const std::string& what) {
    std::vector<std::string> options;
    std::vector<std::string> args;
    for (const auto& arg : app.remaining(true)) {
        const bool option = arg.size() > 1 && arg.front() == '-' && !is_integer_text(arg);
        (option ? options : args).push_back(option ? arg.substr(0, arg.find('=')) : in_quotes(arg));
    }
    std::string msg;
    if (!options.empty()) {
        msg = (options.size() == 1 ? "unknown option " : "unknown options ") + util::join(options, ", ");
        if (auto near = options.size() == 1 ? util::nearest(options.front(), option_names(chain)) : std::nullopt) {
            // The option exists, but was given before the command that takes it (`gpupool --repo X recipe list`).
            msg += *near == options.front() ? "; it goes after the command it belongs to"
                                            : "; did you mean " + *near + "?";
        }
    } else if (!args.empty()) {
        msg = (args.size() == 1 ? "unexpected argument " : "unexpected arguments ") + util::join(args, ", ");
    } else {
        msg = what;
    }
    return make_error(ErrorCode::invalid_input, with_help_hint(msg, chain));
}

} // namespace

Error usage_error(const CLI::ParseError& e, const CLI::App& app) {
    const std::vector<const CLI::App*> chain = reached(app);
    // By type, not get_name(): some errors carry the App's name there.
    const bool required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    const bool mismatch = dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr;
    const bool invalid = dynamic_cast<const CLI::ValidationError*>(&e) != nullptr;
    const std::string what = e.what();
    if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
        return conversion_error(what, chain);
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
        return extras_error(app, chain, what);
    }
    if (required && (what == "A subcommand is required" || what.starts_with("Requires at least"))) {
        return missing_command(chain);
    }
    if (required && what.ends_with(" is required")) {
        const std::string name = what.substr(0, what.size() - std::string_view(" is required").size());
        const std::string msg =
            name.starts_with("-") ? "missing required option " + name : "missing required argument `" + name + "`";
        return make_error(ErrorCode::invalid_input, with_help_hint(msg, chain));
    }
    // "--url: 1 required TEXT missing", "--level: x not in {a,b}": the name, then what is wrong.
    const std::size_t colon = what.find(": ");
    if ((mismatch || invalid) && colon != std::string::npos) {
        const std::string name = what.substr(0, colon);
        std::string msg = what.substr(colon + 2);
        const std::size_t not_in = msg.find(" not in {");
        if (mismatch && msg.ends_with(" missing")) {
            msg = with_help_hint("needs a value", chain);
        } else if (not_in != std::string::npos && msg.ends_with("}")) {
            const std::string allowed = msg.substr(not_in + 9, msg.size() - not_in - 10);
            msg = "expected one of " + util::join(split_on(allowed, ","), ", ") + ", got " +
                  in_quotes(msg.substr(0, not_in));
        }
        return make_error(ErrorCode::invalid_input, msg, name);
    }
    return make_error(ErrorCode::invalid_input, with_help_hint(what, chain));
}

} // namespace gpupool::cmd
