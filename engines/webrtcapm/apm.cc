// Implementation of apm.h on top of the C++ API of webrtc-audio-processing 1.3.
#include "apm.h"

#include <array>
#include <new>

#include "api/audio/echo_canceller3_config.h"
#include "api/audio/echo_control.h"
#include "modules/audio_processing/include/audio_processing.h"

// Version 1.3 derives AEC3's configuration from AudioProcessing::Config and keeps its
// filter length (13 blocks of 4 ms) and initial state fixed; it installs neither
// EchoCanceller3's header nor a factory for it. The library exports the class's
// constructor and CreateDefaultConfig: declared here as the library defines them, they
// let an EchoControlFactory of ours make AEC3 with those settings changed.
namespace webrtc {
class EchoCanceller3 : public EchoControl {
public:
	EchoCanceller3(const EchoCanceller3Config &config, int sample_rate_hz, size_t num_render_channels,
	               size_t num_capture_channels);
	~EchoCanceller3() override;
	static EchoCanceller3Config CreateDefaultConfig(size_t num_render_channels, size_t num_capture_channels);
	void AnalyzeRender(AudioBuffer *render) override;
	void AnalyzeCapture(AudioBuffer *capture) override;
	void ProcessCapture(AudioBuffer *capture, bool level_change) override;
	void ProcessCapture(AudioBuffer *capture, AudioBuffer *linear_output, bool level_change) override;
	Metrics GetMetrics() const override;
	void SetAudioBufferDelay(int delay_ms) override;
	bool ActiveProcessing() const override;
};
} // namespace webrtc

namespace {

// kEchoCanceller3Room is the memory an EchoCanceller3 is built in: the class takes
// 1032 bytes in 1.3 (what AudioProcessingImpl allocates for it); the rest is margin for
// a rebuild of the library that grows it.
constexpr size_t kEchoCanceller3Room = 16384;

// setIf sets *v to x when x is not zero (zero keeps the library's value).
void setIf(float *v, float x) {
	if (x != 0)
		*v = x;
}

// TunedAec3Factory makes AEC3 as AudioProcessing would (CreateDefaultConfig is what it
// starts from too), with the filter length, initial state and suppressor changed where
// set.
class TunedAec3Factory : public webrtc::EchoControlFactory {
public:
	explicit TunedAec3Factory(const parley_apm_config &c) : c_(c) {}
	std::unique_ptr<webrtc::EchoControl> Create(int sample_rate_hz, int num_render_channels,
	                                            int num_capture_channels) override {
		webrtc::EchoCanceller3Config cfg =
		    webrtc::EchoCanceller3::CreateDefaultConfig(num_render_channels, num_capture_channels);
		if (c_.aec3_filter_blocks > 0) {
			cfg.filter.refined.length_blocks = c_.aec3_filter_blocks;
			cfg.filter.coarse.length_blocks = c_.aec3_filter_blocks;
		}
		if (c_.aec3_initial_state_ms > 0)
			cfg.filter.initial_state_seconds = c_.aec3_initial_state_ms / 1000.f;
		// AEC3 keeps its linear output only when its own config says so; 1.3 does not
		// pass AudioProcessing's flag on to a factory.
		cfg.filter.export_linear_aec_output = c_.aec3_linear_output != 0;
		auto &s = cfg.suppressor;
		setIf(&s.normal_tuning.max_inc_factor, c_.aec3_max_gain_rise);
		setIf(&s.nearend_tuning.max_inc_factor, c_.aec3_max_gain_rise);
		setIf(&s.normal_tuning.mask_lf.enr_transparent, c_.aec3_lf_transparent);
		setIf(&s.normal_tuning.mask_lf.enr_suppress, c_.aec3_lf_suppress);
		setIf(&s.normal_tuning.mask_hf.enr_transparent, c_.aec3_hf_transparent);
		setIf(&s.normal_tuning.mask_hf.enr_suppress, c_.aec3_hf_suppress);
		setIf(&cfg.ep_strength.default_len, c_.aec3_reverb_decay);
		void *mem = ::operator new(kEchoCanceller3Room);
		return std::unique_ptr<webrtc::EchoControl>(
		    new (mem) webrtc::EchoCanceller3(cfg, sample_rate_hz, num_render_channels, num_capture_channels));
	}

private:
	parley_apm_config c_;
};

} // namespace

struct parley_apm {
	rtc::scoped_refptr<webrtc::AudioProcessing> apm;
	webrtc::StreamConfig stream;
	bool linear_output;
};

static webrtc::AudioProcessing::Config to_config(const parley_apm_config *c) {
	webrtc::AudioProcessing::Config cfg;
	cfg.echo_canceller.enabled = c->echo != PARLEY_APM_ECHO_OFF;
	cfg.echo_canceller.mobile_mode = c->echo == PARLEY_APM_ECHO_MOBILE;
	cfg.noise_suppression.enabled = c->noise_suppression >= 0;
	if (c->noise_suppression >= 0)
		cfg.noise_suppression.level =
		    static_cast<webrtc::AudioProcessing::Config::NoiseSuppression::Level>(c->noise_suppression);
	cfg.high_pass_filter.enabled = c->high_pass_filter != 0;
	cfg.gain_controller1.enabled = c->agc1_mode != PARLEY_APM_AGC1_OFF;
	if (cfg.gain_controller1.enabled) {
		cfg.gain_controller1.mode =
		    c->agc1_mode == PARLEY_APM_AGC1_FIXED_DIGITAL
		        ? webrtc::AudioProcessing::Config::GainController1::kFixedDigital
		        : webrtc::AudioProcessing::Config::GainController1::kAdaptiveDigital;
		cfg.gain_controller1.target_level_dbfs = c->agc1_target_level_dbfs;
		cfg.gain_controller1.compression_gain_db = c->agc1_compression_gain_db;
		cfg.gain_controller1.enable_limiter = c->agc1_limiter != 0;
		// Parley has no analog microphone gain to steer.
		cfg.gain_controller1.analog_gain_controller.enabled = false;
	}
	cfg.gain_controller2.enabled = c->agc2 != 0;
	cfg.gain_controller2.fixed_digital.gain_db = c->agc2_fixed_gain_db;
	cfg.gain_controller2.adaptive_digital.enabled = c->agc2_adaptive != 0;
	cfg.residual_echo_detector.enabled = c->residual_echo_detector != 0;
	cfg.echo_canceller.export_linear_aec_output = c->aec3_linear_output != 0;
	return cfg;
}

extern "C" parley_apm *parley_apm_new(const parley_apm_config *c, int *err) {
	*err = 0;
	parley_apm *p = new (std::nothrow) parley_apm;
	if (p == nullptr) {
		*err = webrtc::AudioProcessing::kCreationFailedError;
		return nullptr;
	}
	// Create hands over an object with no references; the scoped_refptr takes the first.
	webrtc::AudioProcessingBuilder builder;
	// The linear output needs the factory too: without export_linear_aec_output in
	// AEC3's own config, 1.3 crashes when AudioProcessing asks for it.
	bool tuned = c->aec3_filter_blocks > 0 || c->aec3_initial_state_ms > 0 || c->aec3_linear_output ||
	             c->aec3_max_gain_rise != 0 || c->aec3_lf_transparent != 0 || c->aec3_lf_suppress != 0 ||
	             c->aec3_hf_transparent != 0 || c->aec3_hf_suppress != 0 || c->aec3_reverb_decay != 0;
	if (c->echo == PARLEY_APM_ECHO_AEC3 && tuned)
		builder.SetEchoControlFactory(std::make_unique<TunedAec3Factory>(*c));
	p->apm = builder.Create();
	if (!p->apm) {
		delete p;
		*err = webrtc::AudioProcessing::kCreationFailedError;
		return nullptr;
	}
	p->apm->ApplyConfig(to_config(c));
	p->stream = webrtc::StreamConfig(c->sample_rate, 1);
	p->linear_output = c->echo == PARLEY_APM_ECHO_AEC3 && c->aec3_linear_output != 0;
	webrtc::ProcessingConfig pc;
	pc.input_stream() = p->stream;
	pc.output_stream() = p->stream;
	pc.reverse_input_stream() = p->stream;
	pc.reverse_output_stream() = p->stream;
	int rc = p->apm->Initialize(pc);
	if (rc != webrtc::AudioProcessing::kNoError) {
		delete p;
		*err = rc;
		return nullptr;
	}
	return p;
}

extern "C" void parley_apm_free(parley_apm *p) { delete p; }

extern "C" int parley_apm_analyze_render(parley_apm *p, const float *frame) {
	const float *channels[1] = {frame};
	return p->apm->AnalyzeReverseStream(channels, p->stream);
}

extern "C" int parley_apm_process_capture(parley_apm *p, float *frame, int delay_ms) {
	// The delay must be set before every capture frame while echo control is on.
	int rc = p->apm->set_stream_delay_ms(delay_ms);
	if (rc != webrtc::AudioProcessing::kNoError && rc != webrtc::AudioProcessing::kBadStreamParameterWarning)
		return rc;
	float *channels[1] = {frame};
	rc = p->apm->ProcessStream(channels, p->stream, p->stream, channels);
	// Each capture frame offers its statistics through a one-slot queue that stays
	// full, with the first frame's figures, until GetStatistics empties it. Emptying it
	// after every frame keeps the library's cached copy current, so that
	// parley_apm_stats_get reports the last frame rather than a stale one.
	p->apm->GetStatistics();
	return rc;
}

extern "C" int parley_apm_linear_output(parley_apm *p, float *out) {
	if (!p->linear_output)
		return 0;
	std::array<float, 160> linear[1];
	if (!p->apm->GetLinearAecOutput(rtc::ArrayView<std::array<float, 160>>(linear, 1)))
		return 0;
	// The library hands it over on its internal scale, that of 16-bit samples.
	for (size_t i = 0; i < linear[0].size(); i++)
		out[i] = linear[0][i] / 32768.f;
	return 1;
}

extern "C" void parley_apm_stats_get(parley_apm *p, parley_apm_stats *out) {
	webrtc::AudioProcessingStats s = p->apm->GetStatistics();
	*out = parley_apm_stats{};
	if (s.echo_return_loss) { out->has_erl = 1; out->erl = *s.echo_return_loss; }
	if (s.echo_return_loss_enhancement) { out->has_erle = 1; out->erle = *s.echo_return_loss_enhancement; }
	if (s.divergent_filter_fraction) { out->has_divergent = 1; out->divergent = *s.divergent_filter_fraction; }
	if (s.delay_ms) { out->has_delay = 1; out->delay_ms = *s.delay_ms; }
	if (s.delay_median_ms) { out->has_delay_median = 1; out->delay_median_ms = *s.delay_median_ms; }
	if (s.delay_standard_deviation_ms) { out->has_delay_std = 1; out->delay_std_ms = *s.delay_standard_deviation_ms; }
	if (s.residual_echo_likelihood) { out->has_residual = 1; out->residual = *s.residual_echo_likelihood; }
	if (s.residual_echo_likelihood_recent_max) {
		out->has_residual_max = 1;
		out->residual_max = *s.residual_echo_likelihood_recent_max;
	}
}
