#include "experiments/report_document.hpp"

#include <algorithm>
#include <sstream>
#include <string_view>

namespace fplab::experiments {
namespace {

std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Text as it reads, whatever it holds (a recipe's name or description is the user's): every
// character Markdown could take for markup is backslash-escaped (CommonMark renders any escaped
// ASCII punctuation as itself), and line breaks become spaces, so that no text can start a
// heading, list, table row or HTML block of its own. A '|' would also end a table cell.
std::string markdown_text(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    if (std::string_view("\\`*_[]<>|~#!").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A fence longer than any run of backticks in the text, so that the text cannot close it.
std::string code_fence(const std::string& text) {
  size_t longest = 0, run = 0;
  for (char c : text) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

}  // namespace

void ReportDocument::heading(std::string text) { add(ReportBlock::Kind::heading).text = std::move(text); }
void ReportDocument::paragraph(std::string text, std::string lead) {
  auto& b = add(ReportBlock::Kind::paragraph);
  b.text = std::move(text);
  b.lead = std::move(lead);
}
void ReportDocument::table(std::vector<std::string> header, std::vector<std::vector<std::string>> rows) {
  auto& b = add(ReportBlock::Kind::table);
  b.header = std::move(header);
  b.rows = std::move(rows);
}
void ReportDocument::figure(std::string stem, std::string caption) {
  auto& b = add(ReportBlock::Kind::figure);
  b.stem = std::move(stem);
  b.text = std::move(caption);
}
void ReportDocument::links(std::vector<std::pair<std::string, std::string>> links) {
  add(ReportBlock::Kind::links).links = std::move(links);
}
void ReportDocument::code(std::string text) { add(ReportBlock::Kind::code).text = std::move(text); }
ReportBlock& ReportDocument::add(ReportBlock::Kind kind) {
  blocks.emplace_back();
  blocks.back().kind = kind;
  return blocks.back();
}

std::string to_markdown(const ReportDocument& d) {
  std::ostringstream s;
  s << "# " << markdown_text(d.title) << "\n\n";
  for (const auto& b : d.blocks) {
    switch (b.kind) {
      case ReportBlock::Kind::heading:
        s << "## " << markdown_text(b.text) << "\n\n";
        break;
      case ReportBlock::Kind::paragraph:
        s << (b.lead.empty() ? "" : "**" + markdown_text(b.lead) + "** ") << markdown_text(b.text) << "\n\n";
        break;
      case ReportBlock::Kind::table:
        s << "|";
        for (const auto& h : b.header) s << " " << markdown_text(h) << " |";
        s << "\n|";
        for (size_t i = 0; i < b.header.size(); ++i) s << "---|";
        s << "\n";
        for (const auto& row : b.rows) {
          s << "|";
          for (const auto& cell : row) s << " " << markdown_text(cell) << " |";
          s << "\n";
        }
        s << "\n";
        break;
      case ReportBlock::Kind::figure:
        s << "![" << markdown_text(b.text) << "](" << b.stem << ".png)\n\n*" << markdown_text(b.text) << "* ([SVG]("
          << b.stem << ".svg), [PDF](" << b.stem << ".pdf))\n\n";
        break;
      case ReportBlock::Kind::links:
        for (const auto& [label, path] : b.links) s << "- [" << markdown_text(label) << "](" << path << ")\n";
        s << "\n";
        break;
      case ReportBlock::Kind::code: {
        const std::string fence = code_fence(b.text);
        s << fence << "\n" << b.text << "\n" << fence << "\n\n";
        break;
      }
    }
  }
  return s.str();
}

std::string to_html(const ReportDocument& d) {
  std::ostringstream s;
  s << "<!doctype html>\n<html><head><meta charset='utf-8'><title>" << html_escaped(d.title)
    << "</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;line-height:1.4}"
       "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px}"
       "td{text-align:right}td:first-child,td:nth-child(2){text-align:left}figure{margin:1em 0}img{max-width:100%}"
       "pre{background:#f4f4f4;padding:6px;white-space:pre-wrap}</style></head><body>\n<h1>"
    << html_escaped(d.title) << "</h1>\n";
  for (const auto& b : d.blocks) {
    switch (b.kind) {
      case ReportBlock::Kind::heading:
        s << "<h2>" << html_escaped(b.text) << "</h2>\n";
        break;
      case ReportBlock::Kind::paragraph:
        s << "<p>" << (b.lead.empty() ? "" : "<b>" + html_escaped(b.lead) + "</b> ") << html_escaped(b.text)
          << "</p>\n";
        break;
      case ReportBlock::Kind::table:
        s << "<table>\n<tr>";
        for (const auto& h : b.header) s << "<th>" << html_escaped(h) << "</th>";
        s << "</tr>\n";
        for (const auto& row : b.rows) {
          s << "<tr>";
          for (const auto& cell : row) s << "<td>" << html_escaped(cell) << "</td>";
          s << "</tr>\n";
        }
        s << "</table>\n";
        break;
      case ReportBlock::Kind::figure: {
        const std::string stem = html_escaped(b.stem);
        s << "<figure><img src='" << stem << ".svg' alt='" << html_escaped(b.text) << "'><figcaption>"
          << html_escaped(b.text) << " (<a href='" << stem << ".png'>PNG</a>, <a href='" << stem
          << ".pdf'>PDF</a>)</figcaption></figure>\n";
        break;
      }
      case ReportBlock::Kind::links:
        s << "<ul>\n";
        for (const auto& [label, path] : b.links)
          s << "<li><a href='" << html_escaped(path) << "'>" << html_escaped(label) << "</a></li>\n";
        s << "</ul>\n";
        break;
      case ReportBlock::Kind::code:
        s << "<pre><code>" << html_escaped(b.text) << "</code></pre>\n";
        break;
    }
  }
  s << "</body></html>\n";
  return s.str();
}

}  // namespace fplab::experiments
