"""The guideline's Markdown renders to sanitised HTML: structure kept, anything active removed."""

from django.template import Context, Template

from labeling.markdown import markdown_html


def test_structure_is_rendered():
    html = markdown_html("# Rules\n\n- **supported**: cite a span\n- *not supported*\n")
    assert "<h1>Rules</h1>" in html
    assert "<li><strong>supported</strong>: cite a span</li>" in html
    assert "<em>not supported</em>" in html


def test_tables_and_code_are_kept():
    html = markdown_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nx < y\n```\n")
    assert "<table>" in html and "<td>1</td>" in html
    assert "<code>x &lt; y\n</code>" in html


def test_script_event_handlers_and_javascript_urls_are_removed():
    html = markdown_html(
        '<script>alert(1)</script>\n\n<img src="x" onerror="alert(2)">\n\n'
        "[click](javascript:alert(3)) [ok](https://example.org)"
    )
    assert "<script" not in html and "alert(1)" not in html
    assert "onerror" not in html
    assert "javascript:" not in html
    assert '<a href="https://example.org" rel="noopener noreferrer">ok</a>' in html


def test_empty_text_renders_nothing():
    assert markdown_html("") == "" and markdown_html("  \n") == ""


def test_template_filter():
    out = Template("{% load certlabel %}{{ text|markdown }}").render(Context({"text": "**b** <i>"}))
    assert "<strong>b</strong>" in out


def test_headings_are_shifted_into_the_pages_outline():
    html = markdown_html("# Title\n\n## Part\n\n###### Deep", heading_offset=2)
    assert "<h3>Title</h3>" in html and "<h4>Part</h4>" in html and "<h6>Deep</h6>" in html
    out = Template("{% load certlabel %}{{ text|markdown:2 }}").render(Context({"text": "# T"}))
    assert out.strip() == "<h3>T</h3>"


def test_images_are_not_rendered():
    html = markdown_html('![x](https://elsewhere.example/t.png) <img src="https://e.example/x">')
    assert "<img" not in html
