// A report as a list of blocks, written once and rendered twice, as Markdown and as HTML, so that
// the two reports hold the same things (they used to be written separately, and drifted apart).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fplab::experiments {

struct ReportBlock {
  enum class Kind { heading, paragraph, table, figure, links, code };
  Kind kind = Kind::paragraph;
  std::string text;                                        // heading, paragraph, code; figure: its caption
  std::string lead;                                        // paragraph: a bold lead-in ("What the research found:")
  std::vector<std::string> header;                         // table
  std::vector<std::vector<std::string>> rows;              // table
  std::vector<std::pair<std::string, std::string>> links;  // links: (label, relative path)
  std::string stem;  // figure: its path without extension; figures/NAME.{png,svg,pdf} beside it
};

struct ReportDocument {
  std::string title;
  std::vector<ReportBlock> blocks;

  void heading(std::string text);
  void paragraph(std::string text, std::string lead = "");
  void table(std::vector<std::string> header, std::vector<std::vector<std::string>> rows);
  void figure(std::string stem, std::string caption);
  void links(std::vector<std::pair<std::string, std::string>> links);
  void code(std::string text);

 private:
  ReportBlock& add(ReportBlock::Kind kind);
};

// Markdown: figures as their PNG with links to the SVG and PDF.
std::string to_markdown(const ReportDocument& document);
// One self-contained HTML page (text escaped): figures as their SVG with links to the PNG and PDF.
std::string to_html(const ReportDocument& document);

}  // namespace fplab::experiments
