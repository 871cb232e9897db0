#pragma once
// Status and Result<T>: how every engine API boundary reports bad input (a truncated
// file, an unknown tensor type, a prompt over the context) without exceptions. Both are
// [[nodiscard]]: an error cannot be dropped by accident (cast to void where ignoring one
// is the point, and say why).
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kvs {

class [[nodiscard]] Status {
public:
    Status() = default;  // ok
    static Status ok() { return {}; }
    static Status error(std::string message) { return Status(std::move(message)); }
    bool is_ok() const { return !m_message.has_value(); }
    explicit operator bool() const { return is_ok(); }
    const std::string& message() const {
        static const std::string kOk = "ok";
        return m_message ? *m_message : kOk;
    }

private:
    explicit Status(std::string m) : m_message(std::move(m)) {}
    std::optional<std::string> m_message;
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_v(std::move(value)) {}  // NOLINT: implicit by design
    // An ok Status is no value: it becomes an error that says so rather than a Result
    // that is neither (which value() would throw on).
    Result(Status error)  // NOLINT
        : m_v(error.is_ok() ? Status::error("internal error: an ok Status was returned where a value was expected")
                            : std::move(error)) {}
    static Result error(std::string message) { return Result(Status::error(std::move(message))); }

    bool is_ok() const { return std::holds_alternative<T>(m_v); }
    explicit operator bool() const { return is_ok(); }
    T& value() & { return std::get<T>(m_v); }
    const T& value() const& { return std::get<T>(m_v); }
    T&& value() && { return std::get<T>(std::move(m_v)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() { return value(); }
    Status status() const { return is_ok() ? Status::ok() : std::get<Status>(m_v); }
    const std::string& message() const {
        static const std::string kOk = "ok";
        return is_ok() ? kOk : std::get<Status>(m_v).message();
    }

private:
    std::variant<T, Status> m_v;
};

}  // namespace kvs

// Propagate an error Status/Result from an expression returning Status.
#define KVS_RETURN_IF_ERROR(expr)                       \
    do {                                                \
        ::kvs::Status kvs_status__ = (expr);            \
        if (!kvs_status__.is_ok()) return kvs_status__; \
    } while (0)
