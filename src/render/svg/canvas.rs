//! A minimal SVG document written as text: rectangles, lines, polylines,
//! circles and text, coordinates printed with one decimal so the output is
//! small and the same on every machine.

use std::fmt::Write;

/// The fonts of every chart: sans-serif, whatever the viewer has.
const FONT_FAMILY: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// The smallest text size used, in pixels.
pub const FONT_SIZE: u32 = 12;

/// Where a text's anchor point sits along it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anchor {
    /// The text starts at the point.
    #[default]
    Start,
    /// The text is centred on the point.
    Middle,
    /// The text ends at the point.
    End,
}

/// How one text is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Text {
    /// Where the point sits along the text.
    pub anchor: Anchor,
    /// Size in pixels, at least [`FONT_SIZE`].
    pub size: u32,
    /// Bold.
    pub bold: bool,
    /// Fill colour.
    pub color: &'static str,
    /// Rotation in degrees around the anchor point (negative: counter-clockwise).
    pub rotate: Option<i32>,
    /// A white outline, so the text stays legible over lines.
    pub halo: bool,
}

impl Default for Text {
    fn default() -> Text {
        Text {
            anchor: Anchor::Start,
            size: FONT_SIZE,
            bold: false,
            color: "#222222",
            rotate: None,
            halo: false,
        }
    }
}

impl Text {
    /// Centred on its point.
    pub fn middle(self) -> Text {
        Text {
            anchor: Anchor::Middle,
            ..self
        }
    }

    /// Ending at its point.
    pub fn end(self) -> Text {
        Text {
            anchor: Anchor::End,
            ..self
        }
    }

    /// In bold.
    pub fn bold(self) -> Text {
        Text { bold: true, ..self }
    }

    /// `size` pixels high.
    pub fn size(self, size: u32) -> Text {
        Text { size, ..self }
    }

    /// In `color`.
    pub fn color(self, color: &'static str) -> Text {
        Text { color, ..self }
    }

    /// Turned by `degrees` around its point.
    pub fn rotate(self, degrees: i32) -> Text {
        Text {
            rotate: Some(degrees),
            ..self
        }
    }

    /// With a white outline, legible over lines.
    pub fn halo(self) -> Text {
        Text { halo: true, ..self }
    }
}

/// An SVG document being drawn, `width` x `height` pixels.
#[derive(Debug, Clone)]
pub struct Canvas {
    width: f64,
    height: f64,
    body: String,
}

impl Canvas {
    /// An empty white canvas.
    pub fn new(width: f64, height: f64) -> Canvas {
        let mut canvas = Canvas {
            width,
            height,
            body: String::new(),
        };
        canvas.rect(0.0, 0.0, width, height, "#ffffff", None);
        canvas
    }

    /// A filled rectangle, with an optional tooltip.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tooltip: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}""#,
            n(x),
            n(y),
            n(w),
            n(h)
        );
        match tooltip {
            Some(tip) => {
                let _ = writeln!(self.body, "><title>{}</title></rect>", escape(tip));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    /// A straight line; `dash` is an SVG dash pattern such as `6 4`.
    pub fn line(
        &mut self,
        from: (f64, f64),
        to: (f64, f64),
        stroke: &str,
        width: f64,
        dash: Option<&str>,
    ) {
        let _ = write!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="{}""#,
            n(from.0),
            n(from.1),
            n(to.0),
            n(to.1),
            n(width)
        );
        if let Some(dash) = dash {
            let _ = write!(self.body, r#" stroke-dasharray="{dash}""#);
        }
        self.body.push_str("/>\n");
    }

    /// A line through several points, with an optional tooltip.
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: &str,
        width: f64,
        dash: Option<&str>,
        tooltip: Option<&str>,
    ) {
        let points: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        let _ = write!(
            self.body,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="{}" stroke-linejoin="round""#,
            points.join(" "),
            n(width)
        );
        if let Some(dash) = dash {
            let _ = write!(self.body, r#" stroke-dasharray="{dash}""#);
        }
        match tooltip {
            Some(tip) => {
                let _ = writeln!(self.body, "><title>{}</title></polyline>", escape(tip));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    /// A filled polygon through `points`, with an optional tooltip.
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str, tooltip: Option<&str>) {
        let points: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", n(*x), n(*y)))
            .collect();
        let _ = write!(
            self.body,
            r#"<polygon points="{}" fill="{fill}""#,
            points.join(" ")
        );
        match tooltip {
            Some(tip) => {
                let _ = writeln!(self.body, "><title>{}</title></polygon>", escape(tip));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    /// A circle with a white outline.
    pub fn circle(&mut self, center: (f64, f64), radius: f64, fill: &str) {
        let _ = writeln!(
            self.body,
            r##"<circle cx="{}" cy="{}" r="{}" fill="{fill}" stroke="#ffffff" stroke-width="1.5"/>"##,
            n(center.0),
            n(center.1),
            n(radius)
        );
    }

    /// One line of text at `(x, y)` (the baseline), escaped.
    pub fn text(&mut self, x: f64, y: f64, content: &str, style: Text) {
        let _ = write!(self.body, r#"<text x="{}" y="{}""#, n(x), n(y));
        match style.anchor {
            Anchor::Start => {}
            Anchor::Middle => self.body.push_str(r#" text-anchor="middle""#),
            Anchor::End => self.body.push_str(r#" text-anchor="end""#),
        }
        let size = style.size.max(FONT_SIZE);
        if size != FONT_SIZE {
            let _ = write!(self.body, r#" font-size="{size}""#);
        }
        if style.bold {
            self.body.push_str(r#" font-weight="bold""#);
        }
        let _ = write!(self.body, r#" fill="{}""#, style.color);
        if let Some(degrees) = style.rotate {
            let _ = write!(
                self.body,
                r#" transform="rotate({degrees} {} {})""#,
                n(x),
                n(y)
            );
        }
        if style.halo {
            self.body.push_str(
                r##" stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke""##,
            );
        }
        let _ = writeln!(self.body, ">{}</text>", escape(content));
    }

    /// The finished document; `title` is its accessible name, `description`
    /// what it shows.
    pub fn finish(self, title: &str, description: &str) -> String {
        format!(
            concat!(
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" "#,
                r#"font-family="{font}" font-size="{size}" role="img" aria-labelledby="chart-title chart-desc">"#,
                "\n<title id=\"chart-title\">{title}</title>\n<desc id=\"chart-desc\">{description}</desc>\n{body}</svg>\n"
            ),
            w = n(self.width),
            h = n(self.height),
            font = FONT_FAMILY,
            size = FONT_SIZE,
            title = escape(title),
            description = escape(description),
            body = self.body,
        )
    }
}

/// A coordinate with at most one decimal: `12`, `12.5`, never `-0`.
pub fn n(value: f64) -> String {
    let tenths = (value * 10.0).round() / 10.0;
    if tenths == 0.0 {
        return "0".to_string();
    }
    if tenths.fract() == 0.0 {
        format!("{tenths:.0}")
    } else {
        format!("{tenths:.1}")
    }
}

/// `text` safe inside an XML element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even when escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A rough width of `text` in pixels at `size`: sans-serif glyphs average
/// about 0.6 of the font size. Used only to decide when labels would collide.
pub fn text_width(text: &str, size: u32) -> f64 {
    text.chars().count() as f64 * f64::from(size) * 0.6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<a & "b" 'c'>"#),
            "&lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;"
        );
        assert_eq!(escape("x\u{1}y"), "x y");
    }

    #[test]
    fn coordinates_have_one_decimal() {
        assert_eq!(n(12.0), "12");
        assert_eq!(n(12.46), "12.5");
        assert_eq!(n(-0.01), "0");
        assert_eq!(n(-3.25), "-3.3");
    }

    #[test]
    fn text_is_escaped_and_legible() {
        let mut canvas = Canvas::new(100.0, 50.0);
        canvas.text(
            1.0,
            2.0,
            "a<b",
            Text {
                size: 8,
                ..Text::default()
            },
        );
        let svg = canvas.finish("t & t", "d");
        assert!(svg.contains(">a&lt;b</text>"));
        assert!(!svg.contains("font-size=\"8\""));
        assert!(svg.contains("<title id=\"chart-title\">t &amp; t</title>"));
    }
}
