#pragma once
// What the quantization table view draws (plain Qt-side data): the rows of the comparison
// table (engine/quant/quant_table.h, converted by app/quant_table_convert) and what a run
// of it asks for.
#include <QMetaType>
#include <QString>
#include <QVector>
#include <optional>

namespace kvs::ui {

// The timed runs behind a mean speed: how many, their sample standard deviation, min, max
// and each run's tokens/s.
struct QuantTableSpreadInfo {
    int runs = 0;
    double sd = 0, min = 0, max = 0;
    QVector<double> values;  // [runs]
};

struct QuantTableRowInfo {
    QString scheme;  // "ref", "int8", "int4-gptq", ...
    QString label;   // "reference", "INT8 RTN", "GPTQ", ...
    std::optional<double> bitsPerWeight;
    std::optional<qint64> sizeBytes;
    std::optional<double> ppl, pplErr;
    // ln(PPL / PPL of the reference / of INT4 RTN) on the same tokens ± the paired standard error
    std::optional<double> lnPplVsRef, lnPplVsRefErr;
    std::optional<double> lnPplVsRtn, lnPplVsRtnErr;
    std::optional<double> meanKl;
    std::optional<double> top1;  // 0..1
    std::optional<double> firstDivergence;
    std::optional<double> prefillTokS, decodeTokS;  // means of the runs
    std::optional<QuantTableSpreadInfo> prefillSpread, decodeSpread;
    QString note;  // why the row has no values, or empty
};

struct QuantTableInfo {
    QString model;
    std::optional<qint64> nParams;
    QString machine;
    QVector<QuantTableRowInfo> rows;
    // The reference row ("ref"), or nullptr.
    const QuantTableRowInfo* reference() const {
        for (const QuantTableRowInfo& r : rows)
            if (r.scheme == QLatin1String("ref")) return &r;
        return nullptr;
    }
};

// A run of the table from the GUI: how much text it scores and calibrates on.
struct QuantTableRequest {
    int evalTokens = 1024;  // tokens of the evaluation text (GPL-3)
    int ctx = 512;          // tokens per chunk; the second half is scored
    int calibTokens = 256;  // AWQ / GPTQ calibration tokens (Apache-2.0)
    int divergenceTokens = 32;
    bool speed = true;  // pp / tg runs per scheme
    int speedRuns = 3;  // timed runs of each (their mean ± sd is shown)
};

}  // namespace kvs::ui

Q_DECLARE_METATYPE(kvs::ui::QuantTableInfo)
Q_DECLARE_METATYPE(kvs::ui::QuantTableRequest)
