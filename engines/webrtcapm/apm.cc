// Implementation of apm.h on top of the C++ API of webrtc-audio-processing 1.3.
#include "apm.h"

#include <new>

#include "modules/audio_processing/include/audio_processing.h"

struct parley_apm {
	rtc::scoped_refptr<webrtc::AudioProcessing> apm;
	webrtc::StreamConfig stream;
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
	p->apm = webrtc::AudioProcessingBuilder().Create();
	if (!p->apm) {
		delete p;
		*err = webrtc::AudioProcessing::kCreationFailedError;
		return nullptr;
	}
	p->apm->ApplyConfig(to_config(c));
	p->stream = webrtc::StreamConfig(c->sample_rate, 1);
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
