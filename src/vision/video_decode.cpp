#include "vision/video_decode.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/log.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include "stave/errors.h"

namespace stave {
namespace {

enum class Container { kMov, kMatroska };

[[noreturn]] void fail(ErrorKind kind, const std::string& label, const std::string& what) {
  throw Error(kind, label + ": " + what);
}

std::string av_message(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

Container sniff_container(std::string_view b, const std::string& label) {
  if (b.size() >= 4 && static_cast<uint8_t>(b[0]) == 0x1A && static_cast<uint8_t>(b[1]) == 0x45 &&
      static_cast<uint8_t>(b[2]) == 0xDF && static_cast<uint8_t>(b[3]) == 0xA3)
    return Container::kMatroska;
  if (b.size() >= 12) {
    const std::string_view box = b.substr(4, 4);
    for (const char* t : {"ftyp", "moov", "mdat", "free", "wide", "skip"})
      if (box == t) return Container::kMov;
  }
  fail(ErrorKind::kInvalidRequest, label, "data is not an MP4, WebM or Matroska video");
}

std::string lower_type(std::string_view ct) {
  std::string t(ct.substr(0, ct.find(';')));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

std::optional<Container> type_container(std::string_view content_type, const std::string& label) {
  const std::string t = lower_type(content_type);
  if (t.empty()) return std::nullopt;
  if (t == "video/mp4" || t == "video/quicktime") return Container::kMov;
  if (t == "video/webm" || t == "video/x-matroska" || t == "video/matroska") return Container::kMatroska;
  fail(ErrorKind::kInvalidRequest, label,
       "unsupported content type '" + std::string(content_type) +
           "' (videos are video/mp4, video/webm or video/x-matroska)");
}

bool codec_allowed(AVCodecID id) {
  switch (id) {
    case AV_CODEC_ID_H264:
    case AV_CODEC_ID_HEVC:
    case AV_CODEC_ID_VP8:
    case AV_CODEC_ID_VP9:
    case AV_CODEC_ID_AV1:
    case AV_CODEC_ID_FFV1:
    case AV_CODEC_ID_PNG:
      return true;
    default:
      return false;
  }
}

struct MemoryReader {
  const uint8_t* data = nullptr;
  int64_t size = 0;
  int64_t pos = 0;
};

int read_cb(void* opaque, uint8_t* buf, int n) {
  auto* m = static_cast<MemoryReader*>(opaque);
  const int64_t left = m->size - m->pos;
  if (left <= 0) return AVERROR_EOF;
  const int k = static_cast<int>(std::min<int64_t>(left, n));
  std::memcpy(buf, m->data + m->pos, static_cast<size_t>(k));
  m->pos += k;
  return k;
}

int64_t seek_cb(void* opaque, int64_t offset, int whence) {
  auto* m = static_cast<MemoryReader*>(opaque);
  if (whence == AVSEEK_SIZE) return m->size;
  whence &= ~AVSEEK_FORCE;
  int64_t base = 0;
  if (whence == SEEK_CUR) base = m->pos;
  else if (whence == SEEK_END) base = m->size;
  else if (whence != SEEK_SET) return AVERROR(EINVAL);
  if (offset > INT64_MAX - base && offset > 0) return AVERROR(EINVAL);
  const int64_t p = base + offset;
  if (p < 0 || p > m->size) return AVERROR(EINVAL);
  m->pos = p;
  return p;
}

// FFmpeg logs every oddity of a hostile file to stderr; stave reports errors itself.
void quiet_ffmpeg_logs() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_level(AV_LOG_QUIET); });
}

// A container must not open anything besides the bytes it was given (MOV data references).
int refuse_io_open(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) { return AVERROR(EPERM); }

// The FFmpeg objects of one VideoSource, freed by this destructor also when the source's
// constructor throws half way.
struct AvObjects {
  AVFormatContext* fmt = nullptr;
  AVIOContext* avio = nullptr;
  AVCodecContext* dec = nullptr;
  AVPacket* pkt = nullptr;
  AVFrame* frame = nullptr;
  AvObjects() = default;
  AvObjects(const AvObjects&) = delete;
  AvObjects& operator=(const AvObjects&) = delete;
  ~AvObjects() {
    av_frame_free(&frame);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
    if (avio) {
      av_freep(&avio->buffer);
      avio_context_free(&avio);
    }
  }
};

// One open video stream over bytes in memory, with its decoder.
class VideoSource {
 public:
  VideoSource(std::string_view bytes, const std::string& label, const VideoDecodeLimits& limits)
      : label_(label), limits_(limits) {
    quiet_ffmpeg_logs();
    const Container c = sniff_container(bytes, label);
    mem_.data = reinterpret_cast<const uint8_t*>(bytes.data());
    mem_.size = static_cast<int64_t>(bytes.size());
    fmt_ = avformat_alloc_context();
    if (!fmt_) fail(ErrorKind::kInternal, label, "out of memory");
    constexpr int kBuf = 1 << 15;
    auto* buf = static_cast<uint8_t*>(av_malloc(kBuf));
    if (!buf) fail(ErrorKind::kInternal, label, "out of memory");
    avio_ = avio_alloc_context(buf, kBuf, 0, &mem_, read_cb, nullptr, seek_cb);
    if (!avio_) {
      av_free(buf);
      fail(ErrorKind::kInternal, label, "out of memory");
    }
    fmt_->pb = avio_;
    fmt_->io_open = refuse_io_open;
    fmt_->max_streams = 64;
    const AVInputFormat* in = av_find_input_format(c == Container::kMov ? "mov" : "matroska");
    if (!in) fail(ErrorKind::kInternal, label, "this FFmpeg build has no demuxer for the container");
    int r = avformat_open_input(&fmt_, nullptr, in, nullptr);  // frees fmt_ on failure
    if (r < 0) fail(ErrorKind::kInvalidRequest, label, "cannot read the video container: " + av_message(r));
    container_ = fmt_->iformat->name;
    // The sizes the container declares are checked before anything decodes a frame; the
    // decoders that avformat_find_stream_info opens get the same pixel budget, one thread.
    for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
      const AVCodecParameters* par = fmt_->streams[i]->codecpar;
      if (par->codec_type == AVMEDIA_TYPE_VIDEO && par->width > 0 && par->height > 0)
        check_size(par->width, par->height);
    }
    std::vector<AVDictionary*> stream_options(fmt_->nb_streams, nullptr);
    for (AVDictionary*& d : stream_options) {
      av_dict_set_int(&d, "max_pixels", limits.max_frame_pixels, 0);
      av_dict_set(&d, "threads", "1", 0);
    }
    r = avformat_find_stream_info(fmt_, stream_options.empty() ? nullptr : stream_options.data());
    for (AVDictionary*& d : stream_options) av_dict_free(&d);
    if (r < 0) fail(ErrorKind::kInvalidRequest, label, "cannot read the video streams: " + av_message(r));
    const AVCodec* codec = nullptr;
    stream_ = av_find_best_stream(fmt_, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream_ < 0) fail(ErrorKind::kInvalidRequest, label, "the file has no decodable video stream");
    AVStream* st = fmt_->streams[stream_];
    const AVCodecParameters* par = st->codecpar;
    if (!codec_allowed(par->codec_id) || !codec)
      fail(ErrorKind::kUnsupported, label,
           std::string("video codec '") + avcodec_get_name(par->codec_id) +
               "' is not supported (H.264, HEVC, VP8, VP9, AV1, FFV1, PNG are)");
    check_size(par->width, par->height);
    if (st->nb_frames > 0 && st->nb_frames > limits.max_total_pixels / (int64_t{par->width} * par->height))
      fail(ErrorKind::kRequestTooLarge, label, too_much_work());
    if (fmt_->duration != AV_NOPTS_VALUE && fmt_->duration > 0) {
      const double d = static_cast<double>(fmt_->duration) / AV_TIME_BASE;
      check_duration(d);
    }
    dec_ = avcodec_alloc_context3(codec);
    if (!dec_) fail(ErrorKind::kInternal, label, "out of memory");
    r = avcodec_parameters_to_context(dec_, par);
    if (r < 0) fail(ErrorKind::kInvalidRequest, label, "bad codec parameters: " + av_message(r));
    dec_->thread_count = 1;  // deterministic, and no threads of our own in a server worker
    dec_->max_pixels = limits.max_frame_pixels;
    dec_->err_recognition |= AV_EF_EXPLODE;
    r = avcodec_open2(dec_, codec, nullptr);
    if (r < 0) fail(ErrorKind::kInvalidRequest, label, "cannot open the video decoder: " + av_message(r));
    codec_name_ = codec->name;
    const AVRational fr = st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0 ? st->avg_frame_rate : st->r_frame_rate;
    if (fr.num > 0 && fr.den > 0) fps_ = av_q2d(fr);
    time_base_ = st->time_base;
    pkt_ = av_packet_alloc();
    frame_ = av_frame_alloc();
    if (!pkt_ || !frame_) fail(ErrorKind::kInternal, label, "out of memory");
  }

  VideoSource(const VideoSource&) = delete;
  VideoSource& operator=(const VideoSource&) = delete;

  // Decodes every frame in order; `on_frame(index, frame)` sees each one.
  void decode_all(const std::function<void(int64_t, const AVFrame*)>& on_frame) {
    int64_t packets = 0;
    for (;;) {
      const int r = av_read_frame(fmt_, pkt_);
      if (r == AVERROR_EOF) break;
      if (r < 0) fail(ErrorKind::kInvalidRequest, label_, "corrupt video data: " + av_message(r));
      if (++packets > limits_.max_packets)
        fail(ErrorKind::kRequestTooLarge, label_,
             "the video has more than " + std::to_string(limits_.max_packets) + " packets");
      if (pkt_->stream_index == stream_) {
        if (pkt_->flags & AV_PKT_FLAG_CORRUPT) {
          av_packet_unref(pkt_);
          fail(ErrorKind::kInvalidRequest, label_, "the video is truncated or corrupt (a frame's data is incomplete)");
        }
        const int s = avcodec_send_packet(dec_, pkt_);
        av_packet_unref(pkt_);
        if (s < 0 && s != AVERROR(EAGAIN))
          fail(ErrorKind::kInvalidRequest, label_, "corrupt video data: " + av_message(s));
        receive(on_frame);
      } else {
        av_packet_unref(pkt_);
      }
    }
    const int s = avcodec_send_packet(dec_, nullptr);
    if (s < 0 && s != AVERROR_EOF) fail(ErrorKind::kInvalidRequest, label_, "corrupt video data: " + av_message(s));
    receive(on_frame);
    if (frames_ == 0) fail(ErrorKind::kInvalidRequest, label_, "the video has no frames");
  }

  VideoInfo info() const {
    VideoInfo v;
    v.container = container_;
    v.codec = codec_name_;
    v.width = width_;
    v.height = height_;
    v.total_frames = frames_;
    v.fps = fps_;
    v.duration_seconds = duration_;
    return v;
  }

 private:
  void check_size(int64_t w, int64_t h) const {
    if (w <= 0 || h <= 0) fail(ErrorKind::kInvalidRequest, label_, "the video has no frame size");
    if (w > limits_.max_frame_pixels / h)
      fail(ErrorKind::kRequestTooLarge, label_,
           std::to_string(w) + "x" + std::to_string(h) + " frames are more than " +
               std::to_string(limits_.max_frame_pixels) + " pixels");
  }

  std::string too_much_work() const {
    return "the video has more than " + std::to_string(limits_.max_total_pixels) +
           " pixels in all its frames (frames x width x height)";
  }

  void check_duration(double d) const {
    if (d > limits_.max_duration_seconds) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", limits_.max_duration_seconds);
      fail(ErrorKind::kRequestTooLarge, label_, std::string("the video lasts more than ") + limit + " seconds");
    }
  }

  void receive(const std::function<void(int64_t, const AVFrame*)>& on_frame) {
    for (;;) {
      const int r = avcodec_receive_frame(dec_, frame_);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) fail(ErrorKind::kInvalidRequest, label_, "corrupt video data: " + av_message(r));
      if (frame_->decode_error_flags != 0 || (frame_->flags & AV_FRAME_FLAG_CORRUPT)) {
        av_frame_unref(frame_);
        fail(ErrorKind::kInvalidRequest, label_, "corrupt video data in frame " + std::to_string(frames_ + 1));
      }
      check_size(frame_->width, frame_->height);
      if (frames_ == 0) {
        width_ = frame_->width;
        height_ = frame_->height;
      } else if (frame_->width != width_ || frame_->height != height_) {
        const std::string what = "the frame size changes from " + std::to_string(width_) + "x" +
                                 std::to_string(height_) + " to " + std::to_string(frame_->width) + "x" +
                                 std::to_string(frame_->height) + " at frame " + std::to_string(frames_ + 1);
        av_frame_unref(frame_);
        fail(ErrorKind::kInvalidRequest, label_, what);
      }
      total_pixels_ += int64_t{frame_->width} * frame_->height;
      if (total_pixels_ > limits_.max_total_pixels) {
        av_frame_unref(frame_);
        fail(ErrorKind::kRequestTooLarge, label_, too_much_work());
      }
      if (++frames_ > limits_.max_frames) {
        av_frame_unref(frame_);
        fail(ErrorKind::kRequestTooLarge, label_,
             "the video has more than " + std::to_string(limits_.max_frames) + " frames");
      }
      const int64_t pts = frame_->best_effort_timestamp;
      if (pts != AV_NOPTS_VALUE && time_base_.den > 0) {
        const double t = static_cast<double>(pts) * av_q2d(time_base_);
        duration_ = std::max(duration_, t);
        if (t > limits_.max_duration_seconds) {
          av_frame_unref(frame_);
          check_duration(t);
        }
      }
      try {
        on_frame(frames_ - 1, frame_);
      } catch (...) {
        av_frame_unref(frame_);
        throw;
      }
      av_frame_unref(frame_);
    }
  }

  std::string label_;
  VideoDecodeLimits limits_;
  MemoryReader mem_;
  AvObjects av_;
  AVFormatContext*& fmt_ = av_.fmt;
  AVIOContext*& avio_ = av_.avio;
  AVCodecContext*& dec_ = av_.dec;
  AVPacket*& pkt_ = av_.pkt;
  AVFrame*& frame_ = av_.frame;
  int stream_ = -1;
  std::string container_, codec_name_;
  std::optional<double> fps_;
  AVRational time_base_{0, 1};
  int64_t frames_ = 0, width_ = 0, height_ = 0, total_pixels_ = 0;
  double duration_ = 0;
};

// RGB24 with swscale: the frame's colour matrix and range (BT.601 when unspecified), bilinear
// chroma (PyAV's default interpolation), full-range RGB out.
class RgbConverter {
 public:
  ~RgbConverter() { sws_freeContext(ctx_); }
  RgbImage convert(const AVFrame* f, const std::string& label) {
    ctx_ = sws_getCachedContext(ctx_, f->width, f->height, static_cast<AVPixelFormat>(f->format), f->width,
                                f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
    if (!ctx_) fail(ErrorKind::kInvalidRequest, label, "cannot convert the video's pixel format to RGB");
    const int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : static_cast<int>(f->colorspace);
    const int src_full = f->color_range == AVCOL_RANGE_JPEG ? 1 : 0;
    sws_setColorspaceDetails(ctx_, sws_getCoefficients(cs), src_full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0,
                             1 << 16, 1 << 16);
    RgbImage img;
    img.width = f->width;
    img.height = f->height;
    const size_t stride = static_cast<size_t>(f->width) * 3;
    img.rgb.resize(stride * static_cast<size_t>(f->height) + 64);  // swscale may write a little past a row
    uint8_t* dst[4] = {img.rgb.data(), nullptr, nullptr, nullptr};
    int dst_stride[4] = {static_cast<int>(stride), 0, 0, 0};
    const int rows = sws_scale(ctx_, f->data, f->linesize, 0, f->height, dst, dst_stride);
    if (rows != f->height) fail(ErrorKind::kInvalidRequest, label, "cannot convert a video frame to RGB");
    img.rgb.resize(stride * static_cast<size_t>(f->height));
    return img;
  }

 private:
  SwsContext* ctx_ = nullptr;
};

}  // namespace

void check_video_content_type(std::string_view content_type, const std::string& label) {
  (void)type_container(content_type, label);
}

VideoInfo probe_video(std::string_view content_type, std::string_view bytes, const std::string& label,
                      const VideoDecodeLimits& limits) {
  const std::optional<Container> declared = type_container(content_type, label);
  const Container actual = sniff_container(bytes, label);
  if (declared && *declared != actual)
    fail(ErrorKind::kInvalidRequest, label,
         "declared content type " + std::string(content_type) + " but the data is a " +
             (actual == Container::kMov ? "MP4/MOV" : "WebM/Matroska") + " file");
  VideoSource src(bytes, label, limits);
  src.decode_all([](int64_t, const AVFrame*) {});
  return src.info();
}

std::vector<RgbImage> decode_video_frames(std::string_view bytes, const std::string& label,
                                          const std::vector<int64_t>& indices, const VideoDecodeLimits& limits,
                                          const std::function<RgbImage(RgbImage)>& each) {
  std::multimap<int64_t, size_t> wanted;  // frame index -> output slots
  for (size_t i = 0; i < indices.size(); ++i) wanted.emplace(indices[i], i);
  std::vector<RgbImage> out(indices.size());
  std::vector<bool> filled(indices.size(), false);
  VideoSource src(bytes, label, limits);
  RgbConverter rgb;
  src.decode_all([&](int64_t index, const AVFrame* f) {
    auto [lo, hi] = wanted.equal_range(index);
    if (lo == hi) return;
    RgbImage img = rgb.convert(f, label);
    if (each) img = each(std::move(img));
    for (auto it = lo; it != hi; ++it) {
      out[it->second] = img;
      filled[it->second] = true;
    }
  });
  for (size_t i = 0; i < indices.size(); ++i)
    if (!filled[i])
      fail(ErrorKind::kInvalidRequest, label,
           "frame " + std::to_string(indices[i]) + " was not decoded the second time (the stream is inconsistent)");
  return out;
}

}  // namespace stave
